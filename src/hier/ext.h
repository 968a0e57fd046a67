/*
 * ext.h - the extension points of a level-3 worker that the layers above (DFX, comm) plug
 * into: control calls, chip services and file-descriptor passing.
 *
 * Control calls (ctl.c). A control call is {kind, payload} posted by the parent to a set of
 * chips; every chip runs the kind's handler on the payload and answers with a status and a
 * reply (or an error message). The parent waits for every answer with a deadline; a chip that
 * is dead or dies before answering fails its part with PX_EPEERDEAD naming the chip, its pid
 * and how it ended. Kinds are rows of the worker's control table, registered before
 * px_worker_init (so every chip has the same table) with a route:
 *   HIER_CTL_ORDERED: through the chip's call ring, run by its main thread in order with the
 *                     chip's tasks (the DFX flush: it must follow every call of the run);
 *   HIER_CTL_SERVICE: through the chip's control ring, run at once by the chip's service
 *                     thread, even while the main thread (core 0) is inside a kernel.
 *
 * Chip services (service.c). A service is a pair of callbacks registered before
 * px_worker_init that run inside every chip process: start() after the chip's engine is
 * built, before the chip's service thread starts and before the chip reports ready (a failure fails px_worker_init with its message), stop()
 * in reverse order when the chip leaves. A service may start threads of its own there; its
 * handlers reach the chip through the chip context (hier_chip).
 *
 * File descriptors (fdpass.c). Memfds move over the socketpair of each chip with SCM_RIGHTS,
 * in batches to many chips at once: parent -> chips (hier_fd_send_lists; a chip finds each
 * with hier_chip_fd_take), chips -> parent (each chip offers one with hier_chip_fd_offer, the
 * parent fetches them with hier_fd_fetch_each). Nothing is ever named in /dev/shm;
 * hier_memfd_create makes the memory objects (mode 0600).
 */
#ifndef PX_HIER_EXT_H
#define PX_HIER_EXT_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <plexus/plexus.h>

#include "dfx/merge/merge.h"

#define HIER_CTL_MAX 32           /* control kinds per worker */
#define HIER_CTL_REPLY_MAX 768    /* bytes of a reply (the mailbox's message size) */
#define HIER_SERVICE_MAX 16       /* chip services per worker */
#define HIER_CHIP_FDS 512         /* descriptors a chip holds received or offered at once */

/* The context of a chip process: only inside a chip (hier_chip_self()). */
typedef struct hier_chip hier_chip;

enum hier_ctl_route { HIER_CTL_ORDERED = 1, HIER_CTL_SERVICE = 2 };

/*
 * A control-call handler, run inside the chip: reads n bytes of payload, may write up to
 * HIER_CTL_REPLY_MAX bytes into reply and sets *reply_n. Returns PX_OK or an error with the
 * message set (px_set_error), which the parent receives as the chip's answer.
 */
typedef px_status (*hier_ctl_cb)(hier_chip *chip, void *arg, const void *payload, size_t n,
                                 void *reply, size_t *reply_n);

/* Registers control kind `name` with its route and handler (arg is passed to it) on level-3
 * worker w before px_worker_init. Returns PX_OK with *kind, or PX_EINVAL / PX_ESTATE /
 * PX_ENOMEM (message set). */
px_status hier_ctl_register(px_worker *w, const char *name, int route, hier_ctl_cb fn,
                            void *arg, int *kind);

/* Bytes of a control call's payload at most. */
size_t hier_ctl_payload_max(void);

/* One chip's answer to a control call. */
typedef struct hier_call_result {
    int chip;
    px_status st;               /* PX_OK, the handler's error, PX_EPEERDEAD, PX_ETIMEDOUT */
    size_t reply_n;             /* bytes of reply (st == PX_OK) */
    char reply[HIER_CTL_REPLY_MAX]; /* the reply, or the error message */
} hier_call_result;

typedef struct hier_call hier_call;

/*
 * Posts control call {kind, payload} to the n chips listed in chips (each once) of a live
 * level-3 worker. A chip that is dead already gets PX_EPEERDEAD at once. Returns PX_OK with
 * *call (wait for it, then free it), or PX_EINVAL / PX_ESTATE / PX_ENOMEM for a bad request
 * (message set; nothing was posted).
 */
px_status hier_call_post(px_worker *w, int kind, const void *payload, size_t n,
                         const int *chips, int nchips, hier_call **call);

/*
 * Waits until every chip of call has answered or died, at most timeout_s seconds (<= 0: the
 * worker's PLEXUS_TIMEOUT_S); the chips that did not answer in time get PX_ETIMEDOUT and are
 * killed as silent (SIGKILL, once; later calls to them fail at once with PX_EPEERDEAD). Returns
 * PX_OK when every chip answered PX_OK, else the first failure in chip order, with its message
 * set ("chip 2 (pid 41) died: killed by signal 9 (SIGKILL); control call \"x\" ...").
 */
px_status hier_call_wait(hier_call *call, double timeout_s);

/* The answer of the i-th chip of call (0 <= i < the count posted), valid after the wait. */
const hier_call_result *hier_call_result_of(const hier_call *call, int i);

/* Frees call (after its wait, or instead of it: a late answer is then dropped). */
void hier_call_free(hier_call *call);

/* Posts, waits and frees; copies the answers into results (n entries) when not NULL. */
px_status hier_call_run(px_worker *w, int kind, const void *payload, size_t n,
                        const int *chips, int nchips, double timeout_s,
                        hier_call_result *results);

/* ---- chip services and the chip context (service.c) ---- */

typedef px_status (*hier_service_start_cb)(hier_chip *chip, void *arg);
typedef void (*hier_service_stop_cb)(hier_chip *chip, void *arg);

/* Registers a chip service on level-3 worker w before px_worker_init: start (may be NULL)
 * runs in every chip before it reports ready, stop (may be NULL) when it leaves. Returns
 * PX_OK, or PX_EINVAL / PX_ESTATE / PX_ENOMEM (message set). */
px_status hier_service_register(px_worker *w, const char *name, hier_service_start_cb start,
                                hier_service_stop_cb stop, void *arg);

/* This process's chip context, or NULL outside a chip process. */
hier_chip *hier_chip_self(void);

/* The chip's index (0 .. chips-1). */
int hier_chip_index(const hier_chip *chip);

/* The chip's level-2 engine (its device memory and cores). */
px_worker *hier_chip_engine(hier_chip *chip);

/* ---- hooks of the layers above ---- */

#define HIER_HOOKS_MAX 4

/*
 * Called in the parent: init(arg) at the start of px_worker_init, after the user's kernels
 * and before the chips are forked (register the layer's own chip kernels and callables there:
 * px_kernel_lookup does not see them; an error fails px_worker_init); run_end(arg, st) when
 * a px_run of the worker is about to return st (its graph has drained, or it never started);
 * destroy(arg) when the worker is destroyed, after its chips have gone; dfx_json as below.
 * Any may be NULL.
 * Registered before px_worker_init; returns PX_OK, or PX_ENOMEM / PX_ESTATE (message set).
 */
struct dfxc_buf;

/* One slice a layer above adds to a level-3 run's merged trace (hier_hooks.dfx_events): the
 * DFX merge's event (dfx/merge/merge.h: a chip's process, a thread, a time span, args). */
typedef dfx_merge_event hier_dfx_event;
typedef dfx_merge_event_cb hier_dfx_event_cb;

typedef struct hier_hooks {
    px_status (*init)(void *arg);
    /* after the chips are forked and ready, at the end of px_worker_init (an error fails it):
     * where a layer starts what must not be forked (the MPI proxy) */
    px_status (*started)(void *arg);
    /* at the start of px_worker_destroy, before the chips leave and the boards every process
     * of the worker maps (the deaths board) are unmapped: a layer's own threads stop reading
     * them here */
    void (*stopping)(void *arg);
    void (*run_end)(void *arg, px_status st);
    /* Appends members (",\n \"name\": value" each) to the merged dfx.json of a level-3
     * run with DFX on (the DFX merge, through hier/dfx_l3_merge.c), before it is written. */
    void (*dfx_json)(void *arg, struct dfxc_buf *b);
    /* Calls add(ctx, e) for each slice the layer adds to the merged trace of a level-3
     * run with DFX on (the DFX merge), on the chips' processes; a chip without a trace gets
     * none. */
    void (*dfx_events)(void *arg, hier_dfx_event_cb add, void *ctx);
    /* After the level-3 merge of a run with DFX on wrote dir's merged outputs (st:
     * the merge's status, the chips' failures included): where a layer above joins several
     * workers' outputs (comm: the hosts of an MPI job, comm/dfx_hosts.c). Returns its own
     * status, which fails the run. */
    px_status (*dfx_merged)(void *arg, const char *dir, px_status st);
    void (*destroy)(void *arg);
} hier_hooks;

px_status hier_hooks_register(px_worker *w, const hier_hooks *hooks, void *arg);

/*
 * The extension slot of a layer above: the arg registered with hooks (the layer's own static
 * table, which names it) on w, or NULL when w is not a level-3 worker or has no such hooks.
 * No lock: hooks are registered before px_worker_init, on the creating thread, and never
 * change after.
 */
void *hier_hooks_arg(px_worker *w, const hier_hooks *hooks);

/*
 * Moves the DFX outputs of level-3 worker w into sub/ of its output directory: several
 * workers that share one directory (the hosts of an MPI job on one machine or on a shared
 * file system) each write their own there, under their own lock. Call it from the init hook
 * (before the fork: the chips inherit the directory). Returns PX_OK, or PX_EINVAL when the
 * path gets too long (the message says which).
 */
px_status hier_dfx_subdir(px_worker *w, const char *sub);

/* ---- registering chip kernels and callables for the layers above ---- */

/*
 * The level-3 registry the public px_kernel_register / px_callable_register sit on, for the
 * layers above (from their init hook, or before px_worker_init): a chip kernel, whose id is
 * the same on every chip (px_kernel_lookup shows the user only the user's own once the
 * chips are forked), and a callable whose calls get arg as their user pointer (on the chip:
 * the parent's arg as the fork copied it). Return PX_OK with *id, or PX_EINVAL / PX_ESTATE /
 * PX_ENOMEM (message set).
 */
px_status hier_kernel_register(px_worker *w, const char *name, px_kernel_fn fn,
                               const px_signature *sig, px_kernel_id *id);
px_status hier_callable_register(px_worker *w, const char *name, px_orch_fn fn, void *arg,
                                 px_callable_id *id);

/* ---- submitting for the layers above ---- */

/* Checks that o is the orchestration of a running, initialised level-3 worker (`what` names
 * the caller in the message); returns PX_OK with *w, or PX_EINVAL / PX_ESTATE. */
px_status hier_orch_worker(px_orch *o, const char *what, px_worker **w);

/* Chips of level-3 worker w (0 for anything else). */
int hier_nchips(px_worker *w);

/*
 * px_submit_group with extra accesses in deps (NULL: none) that take part in the dependency
 * inference like the chips' own but are not sent to any chip and need not lie in the host
 * heap: a layer above describes memory the host engine cannot see (a domain's windows) by
 * addresses it reserves for that purpose.
 */
px_status hier_submit_group_deps(px_orch *o, px_callable_id c, px_task_args *per_chip,
                                 const int *chips, int n, const px_task_args *deps,
                                 px_task_id *id);

/*
 * hier_submit_group_deps with flags: HIER_GROUP_SURVIVE makes a member that dies while the
 * task runs fail only its own part: the task waits for the other members' parts and succeeds
 * when each of them returned PX_OK (it fails with the first one's failure otherwise, or with
 * PX_EPEERDEAD when every member died). A member dead before the task is posted fails it at
 * once, as without the flag.
 */
#define HIER_GROUP_SURVIVE 1u
px_status hier_submit_group_flags(px_orch *o, px_callable_id c, px_task_args *per_chip,
                                  const int *chips, int n, const px_task_args *deps,
                                  unsigned flags, px_task_id *id);

/*
 * Waits until no orphan is in flight on any of chips (n, this worker's): a call of a group
 * task that a member's death finished early keeps running on the other members (it fails
 * at its next look at the deaths board or at its domain's revoke word), in the run that
 * failed and after it, and may still be inside a kernel on the group's domain. A dead chip
 * has none. Returns PX_OK, PX_OK at once for a worker that is not level 3, or PX_ETIMEDOUT
 * at deadline_ns (px_now_ns) with the message naming the chip (`what` names the caller).
 * Once it returns PX_OK every such call's completion has reached the parent: whatever the
 * parent posts to those chips next is ordered after them.
 */
px_status hier_orphans_wait(px_worker *w, const int *chips, int n, uint64_t deadline_ns,
                            const char *what);

/* ---- deaths ---- */

#define HIER_DEATHS_MAX 64

/*
 * The deaths of a worker's chips, in memory that the parent and every chip map (made before
 * the fork): bit i of mask is set, with why[i] written first, when the parent notices that
 * chip i died. Anyone may read it, e.g. a wait inside a chip on a peer that is gone. pid[i] is
 * chip i's process id, written by the parent when it forks the chip (0 before), so that a
 * chip's message can name a peer's process.
 */
typedef struct hier_deaths {
    _Atomic uint64_t mask;
    _Atomic int32_t pid[HIER_DEATHS_MAX];
    char why[HIER_DEATHS_MAX][256];
} hier_deaths;

/* The state letter of process pid in /proc/PID/stat ('R', 'S', 'T' for stopped, ...), or 0
 * when it is unknown (no such process, or pid <= 0). */
int hier_pid_state(pid_t pid);

/* The words for a state letter of hier_pid_state ("running", "stopped", "state unknown"). */
const char *hier_pid_state_name(int state);

/*
 * Writes "chip 3 (pid 42, stopped)" for chip `chip` of the worker whose board is b (its pid
 * from the board, its state from /proc; "dead" when the board says so) into buf (n bytes).
 * Returns the state letter (hier_pid_state; 'X' when dead), or 0 when unknown.
 */
int hier_chip_text(const hier_deaths *b, int chip, char *buf, size_t n);

/* The board of level-3 worker w (parent), or NULL before px_worker_init. */
const hier_deaths *hier_deaths_board(px_worker *w);

/* The board as chip sees it. */
const hier_deaths *hier_chip_deaths(hier_chip *chip);

/*
 * Chip, inside a call that is about to fail: names chip `peer` as silent (it did not take
 * part in time, e.g. a collective's barrier waited for it past the comm deadline). When the
 * call fails, the parent kills every chip the call named (SIGKILL also ends a stopped
 * process), so whatever else waits for it fails at once with PX_EPEERDEAD instead of waiting
 * out its own deadline, and the death message says why it was killed.
 */
void hier_chip_blame(hier_chip *chip, int peer);

/* hier_chip_blame for the chip this process is (hier_chip_self). Returns 1, or 0 when this
 * process is no chip (nobody will kill the peer). */
int hier_blame(int peer);

/* ---- file descriptors (fdpass.c) ---- */

/* Creates an anonymous memory object of bytes (memfd, close-on-exec, mode 0600, never a
 * name in /dev/shm; name shows in /proc/PID/fd only). Returns PX_OK with *fd, or PX_ENOMEM /
 * PX_EINVAL (message set). */
px_status hier_memfd_create(const char *name, size_t bytes, int *fd);

/* What one chip is sent: n descriptors under their tags. */
typedef struct hier_fd_list {
    int chip;
    int n;
    const uint64_t *tags;
    const int *fds;
} hier_fd_list;

/* Parent: passes duplicates of each list's descriptors to its chip (the caller keeps them),
 * every chip at once: one control call to all of them after the messages. Returns once every
 * chip holds its own. PX_EPEERDEAD for a dead chip, PX_ETIMEDOUT, PX_EINVAL, PX_ENOMEM (a
 * chip's table is full). */
px_status hier_fd_send_lists(px_worker *w, const hier_fd_list *l, int nl, double timeout_s);

/* Parent: the same, but each group of chips then gets control call `kind` with payload (n
 * bytes, the same for all; this call writes the batch's number at batch_off of its copy)
 * instead of "hier.fd_in", and its handler receives the batch itself
 * (hier_chip_fd_receive) before it does its work: one control call both moves the
 * descriptors and uses them. res: nl answers, in the lists' order (or NULL). */
px_status hier_fd_send_lists_call(px_worker *w, const hier_fd_list *l, int nl,
                                  double timeout_s, int kind, const void *payload, size_t n,
                                  size_t batch_off, hier_call_result *res);

/* Chip: receives batch `batch` (its descriptors go into the chip's table), from the handler of
 * a call made by hier_fd_send_lists_call. PX_OK, PX_ETIMEDOUT, PX_EIO, PX_ENOMEM. */
px_status hier_chip_fd_receive(hier_chip *chip, uint64_t batch);

/* Parent: fetches from each of the n chips the one descriptor it offered under a tag that
 * matches tag in the bits of mask, all at once; fds[i] is the parent's own (close them).
 * PX_EPEERDEAD, PX_ETIMEDOUT, PX_ENOENT (nothing offered); on failure none is left open. */
px_status hier_fd_fetch_each(px_worker *w, const int *chips, int n, uint64_t tag,
                             uint64_t mask, int *fds, double timeout_s);

/* Parent: one descriptor to one chip, or from one (hier_fd_send_lists, hier_fd_fetch_each). */
px_status hier_fd_send(px_worker *w, int chip, uint64_t tag, int fd, double timeout_s);
px_status hier_fd_fetch(px_worker *w, int chip, uint64_t tag, int *fd, double timeout_s);

/* Chip: takes the descriptor the parent passed under tag (the caller owns it now). Returns
 * PX_OK with *fd, or PX_ENOENT. */
px_status hier_chip_fd_take(hier_chip *chip, uint64_t tag, int *fd);

/* Chip: offers a duplicate of fd under tag for the parent to fetch (the caller keeps fd; the
 * chip's duplicate is closed when fetched or when the chip leaves). PX_OK, PX_EINVAL (tag
 * in use), PX_ENOMEM (table full). */
px_status hier_chip_fd_offer(hier_chip *chip, uint64_t tag, int fd);

/* Chip: closes every descriptor of the chip's table (received or offered) whose tag matches
 * tag in the bits of mask, e.g. all those of one domain, when what they were for is gone or
 * never came to be. Returns how many it closed. */
int hier_chip_fd_discard(hier_chip *chip, uint64_t tag, uint64_t mask);

#endif
