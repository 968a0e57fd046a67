/*
 * test_domain_shrink.c - a domain that survives a member's death (issue 23): revoke, agree,
 * shrink, go on, on a level-3 worker of 4 chips, on direct pairs, staged pairs (profile
 * a2a3-pcie) and mixed pairs (PX_TEST_COMM_MAP_FAIL: one pair falls back to staged).
 *
 * Every scenario allocates a domain "dp" of chips 0..3 in a first run (so it outlives a later
 * run that fails), writes rank r's row, allreduces it and checks the sum worked out here; a
 * chip is then killed (before, during or after a collective; during one while the survivors'
 * calls go on writing their windows after the run failed; two at once; during the shrink),
 * and a later run shrinks the domain: the new domain has the survivors in the old order
 * (px_domain_chip), generation 1, each survivor's window holding the bytes of its old window,
 * and an allreduce on it gives the survivors' sum. Revoke, from the orchestration and from a
 * member's kernel, ends waits of 30 s within a wait's slice with PX_EREVOKED. A wait that a
 * death ends first carries out what reached its rank (the dead member's last signal). After
 * the worker is destroyed nothing is left in /dev/shm and no descriptor stays open.
 * Multi-process: ctest runs it under RESOURCE_LOCK "chips" (tests/system/domain_shrink.cmake).
 */
#include "testutil.h"

#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "hier/hier_internal.h"
#include "dfx/collectors/json.h"

#define TS_COUNT 256 /* floats per rank */
#define TS_CHIPS 4

/* The runtime's waits a timed check goes through: a comm or shrink wait sees a revoke or a
 * death on the board within its slice (PX_COMM_SLICE_NS, SHR_SLICE_NS: 5 ms, bounded here
 * by the 50 ms they were), and a death gets on the board by the watch's pidfd poll
 * (PX_HIER_CHECK_NS) */
#define TS_SLICE_S 0.05
#define TS_DEATH_SEEN_S ((double)PX_HIER_CHECK_NS / 1e9 + TS_SLICE_S)

static px_kernel_id k_die, k_wait, k_revoke, k_kloop, k_knoop, k_late, k_lastsig;
static px_callable_id c_die, c_wait, c_revoke, c_kloop, c_knoop, c_late, c_lastsig;

/* Rank 2 dies at once; the others enter an allreduce that cannot finish. */
static px_status die_kernel(px_core_ctx *ctx, const px_task_args *a)
{
    px_comm *c = px_arg_comm(a, px_arg_count(a) - 1);

    (void)ctx;
    if (c == NULL)
        return PX_EINVAL;
    if (px_comm_rank(c) == 2)
        _exit(9);
    return px_comm_allreduce(c, px_comm_buffer(c, "x", NULL), TS_COUNT, PX_F32, PX_OP_SUM);
}

/* Every rank waits 30 s for signal 0, which nobody sets: only a revoke ends it early. */
static px_status wait_kernel(px_core_ctx *ctx, const px_task_args *a)
{
    px_comm *c = px_arg_comm(a, px_arg_count(a) - 1);

    (void)ctx;
    if (c == NULL)
        return PX_EINVAL;
    return px_comm_wait_until(c, 0, PX_CMP_EQ, 1, 30.0);
}

/* The other ranks tell rank 1 they are about to wait (signal 0 of rank 1, add 1), then wait
 * 30 s for their signal 0, which nobody sets; rank 1 revokes once all have told it, so the
 * revoke lands on pending waits. */
static px_status revoke_kernel(px_core_ctx *ctx, const px_task_args *a)
{
    px_comm *c = px_arg_comm(a, px_arg_count(a) - 1);
    px_status st;

    (void)ctx;
    if (c == NULL)
        return PX_EINVAL;
    if (px_comm_rank(c) == 1) {
        st = px_comm_wait_until(c, 0, PX_CMP_GE, (uint64_t)px_comm_size(c) - 1, 30.0);
        return st == PX_OK ? px_comm_revoke(c) : st;
    }
    if ((st = px_comm_signal(c, 1, 0, PX_SIG_ADD, 1)) != PX_OK)
        return st;
    return px_comm_wait_until(c, 0, PX_CMP_EQ, 1, 30.0);
}

/* ---- kernel-side shrink (px_comm_shrink) ---- */

static float ts_val(int chip, int i, int iter);

/* The "meta" buffer of the kernel tests, u64 words a rank's kernel leaves there. */
enum { TK_SHRINKS, TK_SIZE, TK_RANK, TK_FAILED, TK_ITERS, TK_OLD_REFUSED, TK_REVOKED,
       TK_BAD, TK_WORDS };

static void tk_nap(long ms)
{
    struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000L};

    nanosleep(&ts, NULL);
}

/* Shrinks *c (retrying up to 4 times on a death during it), counting in meta. */
static px_status tk_shrink(px_comm **c, uint64_t *meta)
{
    px_comm *nc = NULL, *old = *c;
    px_status st;
    int tries = 0;

    do {
        st = px_comm_shrink(*c, &nc);
        if (st == PX_EPEERDEAD)
            meta[TK_FAILED]++;
    } while (st == PX_EPEERDEAD && ++tries < 5);
    if (st != PX_OK)
        return st;
    /* the old communicator refuses everything now */
    if (px_comm_barrier(old) == PX_EREVOKED && px_comm_shrink(old, &nc) != PX_OK)
        meta[TK_OLD_REFUSED]++;
    *c = nc;
    meta[TK_SHRINKS]++;
    return PX_OK;
}

/*
 * A data-parallel loop inside one kernel: iterations 0 .. iters-1 each write row k of this
 * chip into "x" and allreduce it; args (iters, mask of the chips that die, die iteration,
 * late chip + 1). The dying chips exit as they start iteration `die iteration` (before they
 * contribute); the late chip, seeing the death, waits 200 ms and exits without shrinking (it
 * dies during the survivors' shrink). The survivors shrink in the kernel and redo the
 * iteration.
 */
static px_status kloop_kernel(px_core_ctx *ctx, const px_task_args *a)
{
    px_comm *c = px_arg_comm(a, px_arg_count(a) - 1);
    int iters = (int)px_arg_u64(a, 0);
    uint64_t die = px_arg_u64(a, 1);
    int die_at = (int)px_arg_u64(a, 2), late = (int)px_arg_u64(a, 3) - 1;
    int chip = px_chip_index();
    uint64_t *meta;
    float *x;
    px_status st;

    (void)ctx;
    if (c == NULL || (x = px_comm_buffer(c, "x", NULL)) == NULL ||
        (meta = px_comm_buffer(c, "meta", NULL)) == NULL)
        return PX_EINVAL;
    memset(meta, 0, TK_WORDS * sizeof(uint64_t));
    for (int k = 0; k < iters;) {
        if ((die >> chip & 1) && k == die_at)
            _exit(9);
        for (int i = 0; i < TS_COUNT; i++)
            x[i] = ts_val(chip, i, k);
        st = px_comm_allreduce(c, x, TS_COUNT, PX_F32, PX_OP_SUM);
        if (st == PX_OK) {
            k++;
            continue;
        }
        if (st != PX_EPEERDEAD && st != PX_EREVOKED)
            return st;
        if (chip == late) {
            tk_nap(200);
            _exit(9);
        }
        if ((st = tk_shrink(&c, meta)) != PX_OK)
            return st;
    }
    meta[TK_SIZE] = (uint64_t)px_comm_size(c);
    meta[TK_RANK] = (uint64_t)px_comm_rank(c);
    meta[TK_ITERS] = (uint64_t)iters;
    return PX_OK;
}

/* The sum over the 4 chips of row i at iteration k (nobody dies in knoop). */
static float tk_sum4(int i, int k)
{
    float s = 0;

    for (int q = 0; q < TS_CHIPS; q++)
        s += ts_val(q, i, k);
    return s;
}

/* Allreduces row k of this chip on c and counts wrong elements in meta (all 4 alive). */
static px_status tk_step4(px_comm *c, float *x, int k, uint64_t *meta)
{
    px_status st;

    for (int i = 0; i < TS_COUNT; i++)
        x[i] = ts_val(px_chip_index(), i, k);
    if ((st = px_comm_allreduce(c, x, TS_COUNT, PX_F32, PX_OP_SUM)) != PX_OK)
        return st;
    for (int i = 0; i < TS_COUNT; i++)
        meta[TK_BAD] += x[i] != tk_sum4(i, k);
    return PX_OK;
}

/*
 * Nobody dies: every rank shrinks at once (the same 4 members, generation 1), allreduces,
 * then rank 0 revokes the new communicator while the others wait 30 s for a signal (they
 * told it first that they are about to): they return PX_EREVOKED (kept in meta), shrink
 * again (generation 2: the first head region and the first revocation word again) and
 * allreduce once more.
 */
static px_status knoop_kernel(px_core_ctx *ctx, const px_task_args *a)
{
    px_comm *c = px_arg_comm(a, px_arg_count(a) - 1);
    uint64_t *meta;
    float *x;
    px_status st;

    (void)ctx;
    if (c == NULL || (x = px_comm_buffer(c, "x", NULL)) == NULL ||
        (meta = px_comm_buffer(c, "meta", NULL)) == NULL)
        return PX_EINVAL;
    memset(meta, 0, TK_WORDS * sizeof(uint64_t));
    meta[TK_BAD] += px_comm_shrink(NULL, &c) != PX_EINVAL;
    meta[TK_BAD] += px_comm_shrink(c, NULL) != PX_EINVAL;
    if ((st = tk_shrink(&c, meta)) != PX_OK || (st = tk_step4(c, x, 0, meta)) != PX_OK)
        return st;
    /* the others tell rank 0 they are about to wait (its signal 0), so the revoke lands on
     * pending waits and not on an allreduce some rank has not finished */
    if (px_comm_rank(c) == 0) {
        st = px_comm_wait_until(c, 0, PX_CMP_GE, (uint64_t)px_comm_size(c) - 1, 30.0);
        if (st == PX_OK)
            st = px_comm_revoke(c);
        if (st != PX_OK)
            return st;
    } else if ((st = px_comm_signal(c, 0, 0, PX_SIG_ADD, 1)) == PX_OK) {
        st = px_comm_wait_until(c, 0, PX_CMP_EQ, 1, 30.0);
    }
    meta[TK_REVOKED] = (uint64_t)(int64_t)(px_comm_rank(c) == 0 ? px_comm_barrier(c) : st);
    if ((st = tk_shrink(&c, meta)) != PX_OK || (st = tk_step4(c, x, 1, meta)) != PX_OK)
        return st;
    meta[TK_SIZE] = (uint64_t)px_comm_size(c);
    meta[TK_RANK] = (uint64_t)px_comm_rank(c);
    return PX_OK;
}

/*
 * A dead member's last request (issue 37): chip 3, whose progress thread carries nothing out
 * (PX_TEST_COMM_PROGRESS_OFF=3), waits for its signal 0 to be 7 and goes to sleep in that
 * wait (its spin and yield budgets are microseconds); 100 ms later chip 2 sets it and exits
 * at once. The request is in chip 3's ring, not carried out (a sleeping wait leaves that to
 * the progress thread), when chip 3's wait wakes at its slice and sees the death. The wait
 * must carry it out and succeed: chip 2 sent it before it died. (A wait that ended on the
 * death first made the survivors of a kernel-side shrink go on one call apart: one failed
 * the barrier whose last signal had come before the death, the others passed it.)
 */
static px_status lastsig_kernel(px_core_ctx *ctx, const px_task_args *a)
{
    px_comm *c = px_arg_comm(a, px_arg_count(a) - 1);
    int chip = px_chip_index();
    px_status st;

    (void)ctx;
    if (c == NULL)
        return PX_EINVAL;
    if (chip == 2) {
        tk_nap(100);
        if ((st = px_comm_signal(c, 3, 0, PX_SIG_SET, 7)) == PX_OK)
            _exit(9);
        return st;
    }
    return chip == 3 ? px_comm_wait_until(c, 0, PX_CMP_EQ, 7, 5.0) : PX_OK;
}

/* How long the survivors of late_kernel wait before their last write. */
#define TS_LATE_MS 300

/* Rank 2 dies at once; the others' allreduce fails with PX_EPEERDEAD, and then, TS_LATE_MS
 * later, they write row 9 of their chip into "x": their calls outlive the group task that the
 * death failed (orphans), and these are the last bytes their old windows get. */
static px_status late_kernel(px_core_ctx *ctx, const px_task_args *a)
{
    px_comm *c = px_arg_comm(a, px_arg_count(a) - 1);
    float *x = c != NULL ? px_comm_buffer(c, "x", NULL) : NULL;
    px_status st;

    (void)ctx;
    if (x == NULL)
        return PX_EINVAL;
    if (px_comm_rank(c) == 2)
        _exit(9);
    st = px_comm_allreduce(c, x, TS_COUNT, PX_F32, PX_OP_SUM);
    tk_nap(TS_LATE_MS);
    for (int i = 0; i < TS_COUNT; i++)
        x[i] = ts_val(px_chip_index(), i, 9);
    return st;
}

#define TS_CALLABLE(name, kid)                                                             \
    static px_status name(px_orch *o, const px_task_args *args, void *user)                \
    {                                                                                      \
        px_task_args a = *args;                                                            \
        (void)user;                                                                        \
        return px_submit(o, kid, &a, NULL);                                                \
    }
TS_CALLABLE(die_callable, k_die)
TS_CALLABLE(wait_callable, k_wait)
TS_CALLABLE(revoke_callable, k_revoke)
TS_CALLABLE(kloop_callable, k_kloop)
TS_CALLABLE(knoop_callable, k_knoop)
TS_CALLABLE(late_callable, k_late)
TS_CALLABLE(lastsig_callable, k_lastsig)

typedef enum { TS_DIRECT, TS_STAGED, TS_MIXED } ts_mode;

static char g_dfx_out[256]; /* non-empty: the next worker has the swimlane on, into it */

static px_worker *ts_worker(ts_mode mode)
{
    px_config c;
    px_worker *w = NULL;

    px_test_config(&c, 1);
    c.level = 3;
    c.chips = TS_CHIPS;
    c.device_mem = 64ull << 20;
    c.heap_ring = 16ull << 20;
    c.timeout_s = 30.0 * px_test_slack();
    if (mode == TS_STAGED)
        snprintf(c.device_profile, sizeof(c.device_profile), "a2a3-pcie");
    if (mode == TS_MIXED)
        setenv("PX_TEST_COMM_MAP_FAIL", "3:1", 1); /* pair 1-3 falls back to staged */
    if (g_dfx_out[0] != '\0') {
        c.dfx = PX_DFX_SWIMLANE;
        snprintf(c.out_dir, sizeof(c.out_dir), "%s", g_dfx_out);
    }
    PX_ASSERT_OK(px_worker_create(&c, &w));
    PX_ASSERT_OK(px_kernel_register(w, "ts.die", die_kernel, NULL, &k_die));
    PX_ASSERT_OK(px_callable_register(w, "ts.die", die_callable, &c_die));
    PX_ASSERT_OK(px_kernel_register(w, "ts.wait", wait_kernel, NULL, &k_wait));
    PX_ASSERT_OK(px_callable_register(w, "ts.wait", wait_callable, &c_wait));
    PX_ASSERT_OK(px_kernel_register(w, "ts.revoke", revoke_kernel, NULL, &k_revoke));
    PX_ASSERT_OK(px_callable_register(w, "ts.revoke", revoke_callable, &c_revoke));
    PX_ASSERT_OK(px_kernel_register(w, "ts.kloop", kloop_kernel, NULL, &k_kloop));
    PX_ASSERT_OK(px_callable_register(w, "ts.kloop", kloop_callable, &c_kloop));
    PX_ASSERT_OK(px_kernel_register(w, "ts.knoop", knoop_kernel, NULL, &k_knoop));
    PX_ASSERT_OK(px_callable_register(w, "ts.knoop", knoop_callable, &c_knoop));
    PX_ASSERT_OK(px_kernel_register(w, "ts.late", late_kernel, NULL, &k_late));
    PX_ASSERT_OK(px_callable_register(w, "ts.late", late_callable, &c_late));
    PX_ASSERT_OK(px_kernel_register(w, "ts.lastsig", lastsig_kernel, NULL, &k_lastsig));
    PX_ASSERT_OK(px_callable_register(w, "ts.lastsig", lastsig_callable, &c_lastsig));
    PX_ASSERT_OK(px_worker_init(w));
    unsetenv("PX_TEST_COMM_MAP_FAIL"); /* the chips have their copy */
    unsetenv("PX_TEST_COMM_SHRINK_EXIT");
    unsetenv("PX_TEST_COMM_PROGRESS_OFF");
    return w;
}

/* Kills chip and waits (bounded) until the death watch has put it on the deaths board. */
static void ts_kill(px_worker *w, int chip)
{
    px_hier *h = px_hier_of(w);
    uint64_t until = px_test_deadline_ns(10.0);

    (void)kill(h->procs[chip].pid, SIGKILL); /* ESRCH: it died and was reaped already */
    while (!(atomic_load(&h->deaths->mask) >> chip & 1) && px_test_now_ns() < until)
        sched_yield();
    assert_true(atomic_load(&h->deaths->mask) >> chip & 1);
}

/* The scene: the domain, its replacement, and what the runs saw. */
typedef struct ts_scene {
    px_worker *w;
    px_domain *d, *nd;
    float in[TS_CHIPS][TS_COUNT], out[TS_CHIPS][TS_COUNT];
    int n;                /* ranks of the domain the next run works on */
    px_status shrink_st;  /* the first shrink's status (a death during it) */
    int shrinks;          /* shrink calls it took */
} ts_scene;

/* Row r of rank r: i + 1000 * (chip + 1) + 7 * iteration, exact in floats. */
static float ts_val(int chip, int i, int iter)
{
    return (float)(i + 1000 * (chip + 1) + 7 * iter);
}

/* Row r of the run's arg i (0: in, 1: out) as a view into *v. */
static px_status ts_row(const px_task_args *args, int i, int r, px_tensor *v)
{
    const int64_t row[1] = {TS_COUNT};

    return px_tensor_view(px_arg_tensor(args, i), 1, row, NULL, (int64_t)r * TS_COUNT, v);
}

/* Writes in[r] into every rank r of d, allreduces "x", reads every rank into out[r]. */
static px_status ts_allreduce(px_orch *o, const px_task_args *args, px_domain *d)
{
    px_status st = PX_OK;

    for (int r = 0; st == PX_OK && r < px_domain_size(d); r++) {
        px_tensor v;

        if ((st = ts_row(args, 0, r, &v)) == PX_OK)
            st = px_submit_domain_write(o, d, r, "x", 0, &v, NULL);
    }
    if (st == PX_OK)
        st = px_submit_allreduce(o, d, "x", TS_COUNT, PX_F32, PX_OP_SUM, NULL);
    for (int r = 0; st == PX_OK && r < px_domain_size(d); r++) {
        px_tensor v;

        if ((st = ts_row(args, 1, r, &v)) == PX_OK)
            st = px_submit_domain_read(o, d, r, "x", 0, &v, NULL);
    }
    return st;
}

/* Reads every rank of d's "x" into out (no collective). */
static px_status ts_read(px_orch *o, const px_task_args *args, px_domain *d)
{
    px_status st = PX_OK;

    for (int r = 0; st == PX_OK && r < px_domain_size(d); r++) {
        px_tensor v;

        if ((st = ts_row(args, 1, r, &v)) == PX_OK)
            st = px_submit_domain_read(o, d, r, "x", 0, &v, NULL);
    }
    return st;
}

/* px_run of fn on s, with s->in (IN) and s->out (INOUT) as its args 0 and 1. */
static px_status ts_run(ts_scene *s, px_orch_fn fn)
{
    const int64_t shape[2] = {TS_CHIPS, TS_COUNT};
    px_tensor tin, tout;
    px_task_args args;

    PX_ASSERT_OK(px_tensor_make(&tin, s->in, PX_F32, 2, shape));
    PX_ASSERT_OK(px_tensor_make(&tout, s->out, PX_F32, 2, shape));
    px_args_init(&args);
    px_args_in(&args, &tin);
    px_args_inout(&args, &tout);
    return px_run(s->w, fn, &args, s);
}

static px_status ts_alloc_orch(px_orch *o, const px_task_args *args, void *user)
{
    static const int chips[TS_CHIPS] = {0, 1, 2, 3};
    ts_scene *s = user;
    px_domain_buffer b = {"x", TS_COUNT * sizeof(float)};
    px_domain_spec spec = {PX_DOMAIN_SPEC_HEADER, .name = "dp", .chips = chips,
                           .nchips = TS_CHIPS, .window_bytes = TS_COUNT * sizeof(float),
                           .buffers = &b, .nbuffers = 1, .nsignals = 1};
    px_status st = px_domain_alloc(o, &spec, &s->d);

    (void)args;
    return st == PX_OK ? ts_allreduce(o, args, s->d) : st;
}

static px_status ts_allreduce_orch(px_orch *o, const px_task_args *args, void *user)
{
    ts_scene *s = user;

    return ts_allreduce(o, args, s->nd != NULL ? s->nd : s->d);
}

/* Only an allreduce on the old domain (nothing that changes its windows before it). */
static px_status ts_coll_only_orch(px_orch *o, const px_task_args *args, void *user)
{
    ts_scene *s = user;

    (void)args;
    return px_submit_allreduce(o, s->d, "x", TS_COUNT, PX_F32, PX_OP_SUM, NULL);
}

static px_status ts_die_orch(px_orch *o, const px_task_args *args, void *user)
{
    ts_scene *s = user;

    (void)args;
    return px_submit_domain_task(o, s->d, c_die, NULL, NULL);
}

static px_status ts_late_orch(px_orch *o, const px_task_args *args, void *user)
{
    ts_scene *s = user;

    (void)args;
    return px_submit_domain_task(o, s->d, c_late, NULL, NULL);
}

/* Shrinks d (again while a member dies during it), then reads the survivors' windows. */
static px_status ts_shrink_orch(px_orch *o, const px_task_args *args, void *user)
{
    ts_scene *s = user;
    px_status st;

    do {
        st = px_domain_shrink(o, s->d, &s->nd);
        if (s->shrinks++ == 0)
            s->shrink_st = st;
    } while (st == PX_EPEERDEAD && s->shrinks < 5);
    return st == PX_OK ? ts_read(o, args, s->nd) : st;
}

static void ts_fill(ts_scene *s, const int *chips, int n, int iter)
{
    for (int r = 0; r < n; r++)
        for (int i = 0; i < TS_COUNT; i++)
            s->in[r][i] = ts_val(chips[r], i, iter);
}

/* Checks that out[0 .. n) all hold the sum of the rows of chips (n) at iteration iter. */
static void ts_check_sum(const ts_scene *s, const int *chips, int n, int iter)
{
    for (int r = 0; r < n; r++)
        for (int i = 0; i < TS_COUNT; i++) {
            float want = 0;

            for (int q = 0; q < n; q++)
                want += ts_val(chips[q], i, iter);
            if (s->out[r][i] != want)
                print_error("rank %d element %d: %g, expected %g\n", r, i, s->out[r][i], want);
            assert_true(s->out[r][i] == want);
        }
}

/* First run: "dp" over 4 chips, allreduce checked; the domain stays live. */
static void ts_start(ts_scene *s, ts_mode mode)
{
    static const int all[TS_CHIPS] = {0, 1, 2, 3};

    memset(s, 0, sizeof(*s));
    s->w = ts_worker(mode);
    ts_fill(s, all, TS_CHIPS, 0);
    PX_ASSERT_OK(ts_run(s, ts_alloc_orch));
    ts_check_sum(s, all, TS_CHIPS, 0);
    if (mode == TS_STAGED)
        assert_string_equal(px_domain_transport(s->d, 0, 1), "staged");
    if (mode == TS_MIXED) {
        assert_string_equal(px_domain_transport(s->d, 1, 3), "staged");
        assert_string_equal(px_domain_transport(s->d, 0, 1), "direct");
    }
}

/* Each of the n rows of rows becomes row. */
static void ts_same_rows(float (*rows)[TS_COUNT], int n, const float *row)
{
    for (int r = 0; r < n; r++)
        memcpy(rows[r], row, TS_COUNT * sizeof(float));
}

/* Shrinks s->d in a run; the new domain must be the survivors (n) in order, generation 1,
 * carrying what the survivors' windows held (carried[r]: new rank r's, when not NULL); then
 * an allreduce over it gives the survivors' sum. */
static void ts_shrink_and_go_on(ts_scene *s, const int *survivors, int n,
                                const float (*carried)[TS_COUNT])
{
    px_status st = ts_run(s, ts_shrink_orch);

    if (st != PX_OK)
        print_error("shrink run: %s: %s\n", px_status_name(st), px_last_error());
    assert_int_equal(st, PX_OK);
    assert_int_equal(px_domain_size(s->nd), n);
    assert_int_equal(px_domain_generation(s->nd), 1);
    assert_int_equal(px_domain_generation(s->d), 0);
    assert_string_equal(px_domain_name(s->nd), "dp");
    for (int r = 0; r < n; r++)
        assert_int_equal(px_domain_chip(s->nd, r), survivors[r]);
    for (int r = 0; carried != NULL && r < n; r++)
        assert_memory_equal(s->out[r], carried[r], TS_COUNT * sizeof(float));
    ts_fill(s, survivors, n, 1);
    memset(s->out, 0, sizeof(s->out));
    PX_ASSERT_OK(ts_run(s, ts_allreduce_orch));
    ts_check_sum(s, survivors, n, 1);
}

/* Releases both, destroys the worker; nothing is left in /dev/shm and no descriptor open. */
static void ts_finish(ts_scene *s, int shm0, int fd0)
{
    PX_ASSERT_OK(px_domain_release(s->d));
    if (s->nd != NULL)
        PX_ASSERT_OK(px_domain_release(s->nd));
    PX_ASSERT_OK(px_worker_destroy(s->w));
    assert_int_equal(px_test_shm_plexus_entries(), shm0);
    assert_int_equal(px_test_open_fds(), fd0);
}

static ts_scene g_s;

/* A death before a collective: chip 2 is killed after the first run; an allreduce on the old
 * domain is refused at once with PX_EPEERDEAD (it names a dead chip); the shrink gives chips
 * 0, 1, 3 with the first run's sums carried, and they go on. */
static void ts_death_before(ts_mode mode)
{
    static const int surv[3] = {0, 1, 3};
    int shm0 = px_test_shm_plexus_entries(), fd0 = px_test_open_fds();
    ts_scene *s = &g_s;
    float sum0[3][TS_COUNT];
    px_status st;

    ts_start(s, mode);
    ts_same_rows(sum0, 3, s->out[0]);
    ts_kill(s->w, 2);
    st = ts_run(s, ts_coll_only_orch);
    assert_int_equal(st, PX_EPEERDEAD);
    assert_non_null(strstr(px_last_error(), "chip 2"));
    ts_shrink_and_go_on(s, surv, 3, (const float (*)[TS_COUNT])sum0);
    assert_int_equal(s->shrinks, 1);
    ts_finish(s, shm0, fd0);
}

static void test_death_before_collective_direct(void **state)
{
    (void)state;
    ts_death_before(TS_DIRECT);
}

static void test_death_before_collective_staged(void **state)
{
    (void)state;
    ts_death_before(TS_STAGED);
}

static void test_death_before_collective_mixed(void **state)
{
    (void)state;
    ts_death_before(TS_MIXED);
}

/* A death during a collective: rank 2's chip exits inside a domain task while the others are
 * in an allreduce; the run fails with PX_EPEERDEAD once the death is seen (TS_DEATH_SEEN_S),
 * long before the comm deadline; the shrink gives
 * chips 0, 1, 3 and an allreduce over them is right. */
static void ts_death_during(ts_mode mode)
{
    static const int surv[3] = {0, 1, 3};
    int shm0 = px_test_shm_plexus_entries(), fd0 = px_test_open_fds();
    ts_scene *s = &g_s;
    uint64_t t0;
    px_status st;

    ts_start(s, mode);
    t0 = px_test_now_ns();
    st = ts_run(s, ts_die_orch);
    assert_int_equal(st, PX_EPEERDEAD);
    PX_ASSERT_BY((double)(px_test_now_ns() - t0) / 1e9, TS_DEATH_SEEN_S);
    ts_shrink_and_go_on(s, surv, 3, NULL);
    ts_finish(s, shm0, fd0);
}

static void test_death_during_collective_direct(void **state)
{
    (void)state;
    ts_death_during(TS_DIRECT);
}

static void test_death_during_collective_staged(void **state)
{
    (void)state;
    ts_death_during(TS_STAGED);
}

static void test_death_during_collective_mixed(void **state)
{
    (void)state;
    ts_death_during(TS_MIXED);
}

/* What an orphan writes is carried: chip 2 dies inside a domain task (late_kernel) and the run
 * fails at once, while the survivors' calls of that task still run; they write row 9 into
 * their windows TS_LATE_MS later. The shrink in the next run waits for them before it copies
 * the old windows, so each survivor's new window holds its chip's row 9. (A copy beside the
 * orphans misses those bytes, and TSan reports the race.) */
static void ts_orphans_carried(ts_mode mode)
{
    static const int surv[3] = {0, 1, 3};
    int shm0 = px_test_shm_plexus_entries(), fd0 = px_test_open_fds();
    ts_scene *s = &g_s;
    float rows[3][TS_COUNT];

    ts_start(s, mode);
    assert_int_equal(ts_run(s, ts_late_orch), PX_EPEERDEAD);
    for (int r = 0; r < 3; r++)
        for (int i = 0; i < TS_COUNT; i++)
            rows[r][i] = ts_val(surv[r], i, 9);
    ts_shrink_and_go_on(s, surv, 3, (const float (*)[TS_COUNT])rows);
    ts_finish(s, shm0, fd0);
}

static void test_orphans_writes_carried_direct(void **state)
{
    (void)state;
    ts_orphans_carried(TS_DIRECT);
}

static void test_orphans_writes_carried_staged(void **state)
{
    (void)state;
    ts_orphans_carried(TS_STAGED);
}

/* A death after a collective (the first run's), and two deaths at once: chips 1 and 2 are
 * killed together; the shrink gives chips 0 and 3, carrying the first run's sums. */
static void test_two_deaths_at_once(void **state)
{
    static const int surv[2] = {0, 3};
    int shm0 = px_test_shm_plexus_entries(), fd0 = px_test_open_fds();
    ts_scene *s = &g_s;
    float sum0[2][TS_COUNT];

    (void)state;
    ts_start(s, TS_DIRECT);
    ts_same_rows(sum0, 2, s->out[0]);
    assert_int_equal(kill(px_hier_of(s->w)->procs[1].pid, SIGKILL), 0);
    ts_kill(s->w, 2);
    ts_kill(s->w, 1);
    ts_shrink_and_go_on(s, surv, 2, (const float (*)[TS_COUNT])sum0);
    ts_finish(s, shm0, fd0);
}

/* Shrinks d and releases it in the same run, then reads the survivors' windows. */
static px_status ts_shrink_release_orch(px_orch *o, const px_task_args *args, void *user)
{
    ts_scene *s = user;
    px_status st = px_domain_shrink(o, s->d, &s->nd);

    if (st == PX_OK)
        st = px_domain_release(s->d);
    return st == PX_OK ? ts_read(o, args, s->nd) : st;
}

/* The old domain released in the run that shrank it (its dead member's part included): the
 * survivors' reads on the new domain still work, and the carried sums are there. */
static void test_release_old_in_shrink_run(void **state)
{
    static const int surv[3] = {0, 1, 3};
    int shm0 = px_test_shm_plexus_entries(), fd0 = px_test_open_fds();
    ts_scene *s = &g_s;
    float sum0[TS_COUNT];
    px_status st;

    (void)state;
    ts_start(s, TS_DIRECT);
    memcpy(sum0, s->out[0], sizeof(sum0));
    ts_kill(s->w, 2);
    st = ts_run(s, ts_shrink_release_orch);
    if (st != PX_OK)
        print_error("%s: %s\n", px_status_name(st), px_last_error());
    assert_int_equal(st, PX_OK);
    for (int r = 0; r < 3; r++) {
        assert_int_equal(px_domain_chip(s->nd, r), surv[r]);
        assert_memory_equal(s->out[r], sum0, sizeof(sum0));
    }
    s->d = s->nd;
    s->nd = NULL;
    ts_finish(s, shm0, fd0);
}

/* A shrink's domain shrinks the same way (issue 37), with the generation-0 domain still live:
 * chip 2 dies, the shrink gives chips 0, 1, 3 (generation 1, the same name); then chip 1 dies
 * and generation 1 shrinks to chips 0 and 3 (generation 2), which go on. Before, the second
 * shrink failed: "px_domain_alloc: a live domain is called "dp" already". */
static void test_shrink_twice(void **state)
{
    static const int surv1[3] = {0, 1, 3}, surv2[2] = {0, 3};
    int shm0 = px_test_shm_plexus_entries(), fd0 = px_test_open_fds();
    ts_scene *s = &g_s;
    px_domain *d0;
    px_status st;

    (void)state;
    ts_start(s, TS_DIRECT);
    ts_kill(s->w, 2);
    ts_shrink_and_go_on(s, surv1, 3, NULL);
    d0 = s->d;
    s->d = s->nd;
    s->nd = NULL;
    s->shrinks = 0;
    ts_kill(s->w, 1);
    st = ts_run(s, ts_shrink_orch);
    if (st != PX_OK)
        print_error("second shrink: %s: %s\n", px_status_name(st), px_last_error());
    assert_int_equal(st, PX_OK);
    assert_int_equal(px_domain_generation(s->nd), 2);
    assert_int_equal(px_domain_size(s->nd), 2);
    assert_string_equal(px_domain_name(s->nd), "dp");
    for (int r = 0; r < 2; r++)
        assert_int_equal(px_domain_chip(s->nd, r), surv2[r]);
    ts_fill(s, surv2, 2, 2);
    memset(s->out, 0, sizeof(s->out));
    PX_ASSERT_OK(ts_run(s, ts_allreduce_orch));
    ts_check_sum(s, surv2, 2, 2);
    PX_ASSERT_OK(px_domain_release(d0));
    ts_finish(s, shm0, fd0);
}

/* ---- a death during the shrink ---- */

typedef struct ts_killer {
    px_worker *w;
    long delay_us;
} ts_killer;

static void *ts_killer_main(void *arg)
{
    ts_killer *k = arg;
    struct timespec ts = {.tv_sec = 0, .tv_nsec = k->delay_us * 1000};

    nanosleep(&ts, NULL); /* where in the shrink the fault lands, not a synchronisation */
    kill(px_hier_of(k->w)->procs[3].pid, SIGKILL);
    return NULL;
}

/* Chip 2 is dead; chip 3 is killed at a different moment of the shrink in each trial: the
 * shrink either succeeds before it (and chip 3 is then just dead in the new domain: a second
 * shrink excludes it) or fails with PX_EPEERDEAD and the retry succeeds; either way it ends
 * within the deadline, and the final domain is chips 0 and 1, whose allreduce is right. */
static void test_death_during_shrink(void **state)
{
    static const int surv[2] = {0, 1};
    int shm0 = px_test_shm_plexus_entries(), fd0 = px_test_open_fds();
    int failed = 0;

    (void)state;
    for (int trial = 0; trial < 4; trial++) {
        ts_scene *s = &g_s;
        ts_killer k;
        pthread_t t;
        px_status st;

        ts_start(s, trial % 2 ? TS_STAGED : TS_DIRECT);
        ts_kill(s->w, 2);
        k = (ts_killer){.w = s->w, .delay_us = 300 * trial};
        assert_int_equal(pthread_create(&t, NULL, ts_killer_main, &k), 0);
        st = ts_run(s, ts_shrink_orch);
        pthread_join(t, NULL);
        ts_kill(s->w, 3); /* already dead: waits for the board only */
        failed += s->shrink_st == PX_EPEERDEAD;
        if (st == PX_OK && px_domain_size(s->nd) == 3) { /* shrank before chip 3 died */
            px_domain *old = s->d;

            s->d = s->nd;
            s->nd = NULL;
            PX_ASSERT_OK(px_domain_release(old));
            s->shrinks = 0;
            st = ts_run(s, ts_shrink_orch);
            PX_ASSERT_OK(st);
            assert_int_equal(px_domain_generation(s->nd), 2);
        } else if (st != PX_OK) {
            /* the shrink's domain had chip 3 and the read on it failed: the run freed it,
             * and the old domain may be shrunk again */
            assert_int_equal(st, PX_EPEERDEAD);
            s->nd = NULL;
            s->shrinks = 0;
            st = ts_run(s, ts_shrink_orch);
            PX_ASSERT_OK(st);
            assert_int_equal(px_domain_generation(s->nd), 1);
        }
        PX_ASSERT_OK(st);
        assert_int_equal(px_domain_size(s->nd), 2);
        for (int r = 0; r < 2; r++)
            assert_int_equal(px_domain_chip(s->nd, r), surv[r]);
        ts_fill(s, surv, 2, 1);
        PX_ASSERT_OK(ts_run(s, ts_allreduce_orch));
        ts_check_sum(s, surv, 2, 1);
        ts_finish(s, shm0, fd0);
    }
    print_message("death during shrink: %d of 4 first shrinks failed with PX_EPEERDEAD\n",
                  failed);
}

/* ---- revoke ---- */

static px_status ts_revoke_orch(px_orch *o, const px_task_args *args, void *user)
{
    ts_scene *s = user;
    px_status st = px_submit_domain_task(o, s->d, c_wait, NULL, NULL);

    (void)args;
    if (st == PX_OK)
        st = px_domain_revoke(s->d);
    if (st == PX_OK && px_submit_allreduce(o, s->d, "x", TS_COUNT, PX_F32, PX_OP_SUM, NULL) !=
                           PX_EREVOKED)
        st = px_set_error(PX_EKERNEL, "a submit on a revoked domain was accepted");
    return st;
}

static px_status ts_member_revoke_orch(px_orch *o, const px_task_args *args, void *user)
{
    ts_scene *s = user;

    (void)args;
    return px_submit_domain_task(o, s->d, c_revoke, NULL, NULL);
}

/* Revoke from the orchestration (what) or from rank 1's kernel: every rank waiting 30 s for
 * a signal nobody sets returns PX_EREVOKED within its wait's slice, the run fails with it
 * naming the revoker; later submits on the domain return PX_EREVOKED; a shrink with nobody
 * dead gives a domain of the same 4 chips, and an allreduce over it is right. */
static void ts_revoke(int from_member)
{
    static const int all[TS_CHIPS] = {0, 1, 2, 3};
    int shm0 = px_test_shm_plexus_entries(), fd0 = px_test_open_fds();
    ts_scene *s = &g_s;
    uint64_t t0;
    double secs;
    px_status st;

    ts_start(s, TS_DIRECT);
    t0 = px_test_now_ns();
    st = ts_run(s, from_member ? ts_member_revoke_orch : ts_revoke_orch);
    secs = (double)(px_test_now_ns() - t0) / 1e9;
    print_message("revoke (%s): run returned %s after %.3f s: %s\n",
                  from_member ? "member" : "orchestration", px_status_name(st), secs,
                  px_last_error());
    assert_int_equal(st, PX_EREVOKED);
    assert_non_null(strstr(px_last_error(), from_member ? "revoked by rank 1" :
                                                          "revoked by the orchestration"));
    PX_ASSERT_BY(secs, TS_SLICE_S);
    ts_shrink_and_go_on(s, all, TS_CHIPS, NULL);
    ts_finish(s, shm0, fd0);
}

static void test_revoke_from_orchestration(void **state)
{
    (void)state;
    ts_revoke(0);
}

static void test_revoke_from_member(void **state)
{
    (void)state;
    ts_revoke(1);
}

/* ---- kernel-side shrink: the scenes ---- */

#define TK_ITERS_N 6

typedef struct tk_scene {
    px_worker *w;
    px_domain *d, *nd;
    float x[TS_CHIPS][TS_COUNT];
    uint64_t meta[TS_CHIPS][TK_WORDS];
    uint64_t die, die_at, late;
    int noop;                 /* knoop instead of kloop */
    int die_task;             /* ts.die instead of either */
    int lastsig;              /* ts.lastsig instead of any */
} tk_scene;

static tk_scene g_k;

static px_status tk_alloc_orch(px_orch *o, const px_task_args *args, void *user)
{
    static const int chips[TS_CHIPS] = {0, 1, 2, 3};
    tk_scene *s = user;
    px_domain_buffer b[2] = {{"x", TS_COUNT * sizeof(float)}, {"meta", TK_WORDS * 8}};
    px_domain_spec spec = {PX_DOMAIN_SPEC_HEADER, .name = "kd", .chips = chips,
                           .nchips = TS_CHIPS, .window_bytes = 4096, .buffers = b,
                           .nbuffers = 2, .nsignals = 1};

    (void)args;
    return px_domain_alloc(o, &spec, &s->d);
}

/* One resilient domain task: the loop (or knoop) on every member. */
static px_status tk_loop_orch(px_orch *o, const px_task_args *args, void *user)
{
    tk_scene *s = user;
    px_task_args per[TS_CHIPS];
    px_callable_id c = s->lastsig ? c_lastsig : s->die_task ? c_die : s->noop ? c_knoop : c_kloop;

    (void)args;
    for (int r = 0; r < TS_CHIPS; r++) {
        px_args_init(&per[r]);
        px_args_scalar_u64(&per[r], TK_ITERS_N);
        px_args_scalar_u64(&per[r], s->die);
        px_args_scalar_u64(&per[r], s->die_at);
        px_args_scalar_u64(&per[r], s->late);
    }
    return px_submit_domain_task_resilient(o, s->d, c, per, NULL);
}

/* From the orchestration: a domain of the survivors (px_domain_shrink: the board's deaths,
 * the same as the kernels agreed on), then every rank's "x" and "meta" into args 0 and 1. */
static px_status tk_read_orch(px_orch *o, const px_task_args *args, void *user)
{
    const int64_t xrow[1] = {TS_COUNT}, mrow[1] = {TK_WORDS};
    tk_scene *s = user;
    px_status st = px_domain_shrink(o, s->d, &s->nd);

    for (int tries = 0; st == PX_EPEERDEAD && tries < 3; tries++)
        st = px_domain_shrink(o, s->d, &s->nd);
    for (int r = 0; st == PX_OK && r < px_domain_size(s->nd); r++) {
        px_tensor v;

        if ((st = px_tensor_view(px_arg_tensor(args, 0), 1, xrow, NULL,
                                 (int64_t)r * TS_COUNT, &v)) == PX_OK)
            st = px_submit_domain_read(o, s->nd, r, "x", 0, &v, NULL);
        if (st == PX_OK && (st = px_tensor_view(px_arg_tensor(args, 1), 1, mrow, NULL,
                                                (int64_t)r * TK_WORDS, &v)) == PX_OK)
            st = px_submit_domain_read(o, s->nd, r, "meta", 0, &v, NULL);
    }
    return st;
}

static px_status tk_run(tk_scene *s, px_orch_fn fn)
{
    const int64_t xs[2] = {TS_CHIPS, TS_COUNT}, ms[2] = {TS_CHIPS, TK_WORDS};
    px_tensor tx, tm;
    px_task_args args;

    PX_ASSERT_OK(px_tensor_make(&tx, s->x, PX_F32, 2, xs));
    PX_ASSERT_OK(px_tensor_make(&tm, s->meta, PX_I64, 2, ms));
    px_args_init(&args);
    px_args_inout(&args, &tx);
    px_args_inout(&args, &tm);
    return px_run(s->w, fn, &args, s);
}

/* The worker (mode, with the shrink test hook when hook is not NULL) and the domain "kd". */
static tk_scene *tk_start(ts_mode mode, const char *hook)
{
    tk_scene *s = &g_k;

    memset(s, 0, sizeof(*s));
    if (hook != NULL)
        setenv("PX_TEST_COMM_SHRINK_EXIT", hook, 1);
    s->w = ts_worker(mode);
    PX_ASSERT_OK(tk_run(s, tk_alloc_orch));
    return s;
}

/* Runs the resilient task; it must succeed on the survivors by the deadlines it goes
 * through: at most two deaths (TS_DEATH_SEEN_S each) and the late chip's 200 ms nap. */
static void tk_loop(tk_scene *s)
{
    uint64_t t0 = px_test_now_ns();
    px_status st = tk_run(s, tk_loop_orch);
    double secs = (double)(px_test_now_ns() - t0) / 1e9;

    if (st != PX_OK)
        print_error("resilient task: %s: %s\n", px_status_name(st), px_last_error());
    assert_int_equal(st, PX_OK);
    print_message("kernel-side shrink: the resilient task took %.3f s\n", secs);
    PX_ASSERT_BY(secs, 2 * TS_DEATH_SEEN_S + 0.2);
}

/* Reads the survivors back (surv, n) and checks what every kernel left: the same number of
 * shrinks (shrinks) and of failed attempts on every survivor, its final size and rank, the
 * old communicators refused, and x the sum over the survivors of the last iteration. */
static void tk_check(tk_scene *s, const int *surv, int n, uint64_t shrinks)
{
    px_status st = tk_run(s, tk_read_orch);

    if (st != PX_OK)
        print_error("read run: %s: %s\n", px_status_name(st), px_last_error());
    assert_int_equal(st, PX_OK);
    assert_int_equal(px_domain_size(s->nd), n);
    for (int r = 0; r < n; r++) {
        assert_int_equal(px_domain_chip(s->nd, r), surv[r]);
        assert_int_equal(s->meta[r][TK_SHRINKS], shrinks);
        assert_int_equal(s->meta[r][TK_OLD_REFUSED], shrinks);
        assert_int_equal(s->meta[r][TK_FAILED], s->meta[0][TK_FAILED]);
        assert_int_equal(s->meta[r][TK_SIZE], (uint64_t)n);
        assert_int_equal(s->meta[r][TK_RANK], (uint64_t)r);
        assert_int_equal(s->meta[r][TK_BAD], 0);
        for (int i = 0; i < TS_COUNT; i++) {
            float want = 0;

            for (int q = 0; q < n; q++)
                want += ts_val(surv[q], i, s->noop ? 1 : TK_ITERS_N - 1);
            if (s->x[r][i] != want)
                print_error("rank %d element %d: %g, expected %g\n", r, i, s->x[r][i], want);
            assert_true(s->x[r][i] == want);
        }
    }
    print_message("kernel-side shrink: %llu shrinks, %llu failed attempts on every survivor\n",
                  (unsigned long long)shrinks, (unsigned long long)s->meta[0][TK_FAILED]);
}

static void tk_finish(tk_scene *s, int shm0, int fd0)
{
    PX_ASSERT_OK(px_domain_release(s->d));
    if (s->nd != NULL)
        PX_ASSERT_OK(px_domain_release(s->nd));
    PX_ASSERT_OK(px_worker_destroy(s->w));
    assert_int_equal(px_test_shm_plexus_entries(), shm0);
    assert_int_equal(px_test_open_fds(), fd0);
}

/* Chip 2 exits at iteration 3 of a loop inside one resilient task: the survivors' allreduce
 * fails, they shrink in the kernel to chips 0, 1, 3 and finish every iteration; the task and
 * the run succeed; the orchestration's shrink afterwards finds the same survivors and the
 * kernels' last sums in their windows (carried in place). */
static void tk_death_in_loop(ts_mode mode)
{
    static const int surv[3] = {0, 1, 3};
    int shm0 = px_test_shm_plexus_entries(), fd0 = px_test_open_fds();
    tk_scene *s = tk_start(mode, NULL);

    s->die = 1u << 2;
    s->die_at = 3;
    tk_loop(s);
    tk_check(s, surv, 3, 1);
    assert_int_equal(s->meta[0][TK_FAILED], 0);
    tk_finish(s, shm0, fd0);
}

static void test_kernel_shrink_direct(void **state)
{
    (void)state;
    tk_death_in_loop(TS_DIRECT);
}

static void test_kernel_shrink_staged(void **state)
{
    (void)state;
    tk_death_in_loop(TS_STAGED);
}

static void test_kernel_shrink_mixed(void **state)
{
    (void)state;
    tk_death_in_loop(TS_MIXED);
}

/* Chips 1 and 2 exit at once: one shrink to chips 0 and 3. */
static void test_kernel_shrink_two_deaths(void **state)
{
    static const int surv[2] = {0, 3};
    int shm0 = px_test_shm_plexus_entries(), fd0 = px_test_open_fds();
    tk_scene *s = tk_start(TS_STAGED, NULL);

    (void)state;
    s->die = 1u << 1 | 1u << 2;
    s->die_at = 2;
    tk_loop(s);
    tk_check(s, surv, 2, 1);
    tk_finish(s, shm0, fd0);
}

/* A death during the shrink, three ways: chip 3 exits 200 ms after it saw chip 2's death
 * without shrinking (the others wait for its proposal), right after it proposed (the hook:
 * the others see it dead before it is ready), or right after it said ready (the shrink
 * succeeds with chip 3 in it, dead: the next allreduce fails and a second shrink excludes
 * it). Every survivor ends in the same state (the same failed attempts), on chips 0 and 1. */
static void tk_death_during(const char *hook, uint64_t late, uint64_t shrinks, int failed)
{
    static const int surv[2] = {0, 1};
    int shm0 = px_test_shm_plexus_entries(), fd0 = px_test_open_fds();
    tk_scene *s = tk_start(TS_DIRECT, hook);

    s->die = 1u << 2;
    s->die_at = 3;
    s->late = late;
    tk_loop(s);
    tk_check(s, surv, 2, shrinks);
    if (failed >= 0)
        assert_int_equal(s->meta[0][TK_FAILED], (uint64_t)failed);
    tk_finish(s, shm0, fd0);
}

static void test_kernel_shrink_death_before_proposal(void **state)
{
    (void)state;
    tk_death_during(NULL, 3 + 1, 1, -1); /* how many attempts failed depends on timing */
}

/* 0 or 1 failed attempts: the parent's death watch hears chip 3's end at once, so the
 * survivors may exclude it in their first proposal already; when they proposed before, that
 * attempt fails. Either way every survivor ends the same (tk_check). */
static void test_kernel_shrink_death_after_proposal(void **state)
{
    (void)state;
    tk_death_during("3:1", 0, 1, -1);
    assert_true(g_k.meta[0][TK_FAILED] <= 1);
}

static void test_kernel_shrink_death_after_ready(void **state)
{
    (void)state;
    tk_death_during("3:2", 0, 2, 0);
}

/* Nobody dies: shrinks give the same four members; a member's revoke of the new
 * communicator reaches the others (PX_EREVOKED), and a second shrink (generation 2, back on
 * the first head and revocation word) works; NULL arguments are refused. */
static void tk_noop(ts_mode mode)
{
    static const int all[TS_CHIPS] = {0, 1, 2, 3};
    int shm0 = px_test_shm_plexus_entries(), fd0 = px_test_open_fds();
    tk_scene *s = tk_start(mode, NULL);

    s->noop = 1;
    tk_loop(s);
    tk_check(s, all, TS_CHIPS, 2);
    for (int r = 0; r < TS_CHIPS; r++)
        assert_int_equal((int64_t)s->meta[r][TK_REVOKED], PX_EREVOKED);
    tk_finish(s, shm0, fd0);
}

static void test_kernel_shrink_nobody_dead_direct(void **state)
{
    (void)state;
    tk_noop(TS_DIRECT);
}

static void test_kernel_shrink_nobody_dead_staged(void **state)
{
    (void)state;
    tk_noop(TS_STAGED);
}

/* A resilient task whose survivors fail (ts.die: they return the death from their allreduce)
 * fails with their status; a domain task that is not resilient fails at the death itself. */
static void test_resilient_task_fails_with_survivors(void **state)
{
    int shm0 = px_test_shm_plexus_entries(), fd0 = px_test_open_fds();
    tk_scene *s = tk_start(TS_DIRECT, NULL);
    px_status st;

    (void)state;
    s->die_task = 1;
    st = tk_run(s, tk_loop_orch);
    assert_int_equal(st, PX_EPEERDEAD);
    if (strstr(px_last_error(), "rank 2 of the domain is dead") == NULL)
        print_error("%s\n", px_last_error());
    assert_non_null(strstr(px_last_error(), "rank 2 of the domain is dead"));
    tk_finish(s, shm0, fd0);
}

/* The last signal of a member that died right after it sent it is carried out before the
 * wait for it looks at the death (lastsig_kernel): the resilient task succeeds. */
static void test_dead_members_last_signal_arrives(void **state)
{
    int shm0 = px_test_shm_plexus_entries(), fd0 = px_test_open_fds();
    tk_scene *s;
    px_status st;

    (void)state;
    setenv("PX_TEST_COMM_PROGRESS_OFF", "3", 1);
    s = tk_start(TS_STAGED, NULL);
    s->lastsig = 1;
    st = tk_run(s, tk_loop_orch);
    if (st != PX_OK)
        print_error("resilient task: %s: %s\n", px_status_name(st), px_last_error());
    assert_int_equal(st, PX_OK);
    tk_finish(s, shm0, fd0);
}

/* ---- DFX: the revoke, the agreement and the shrink on the survivors' tracks ---- */

static dfxc_json *td_load(const char *name)
{
    char path[400];
    dfxc_json *j = NULL;

    snprintf(path, sizeof(path), "%s/%s", g_dfx_out, name);
    PX_ASSERT_OK(dfxc_json_load(path, &j));
    return j;
}

/* The one X slice called name on pid (tid when >= 0) of the merged trace; fails unless there
 * is exactly one. */
static const dfxc_json *td_slice(const dfxc_json *t, int pid, int tid, const char *name)
{
    const dfxc_json *ev = dfxc_json_get(t, "traceEvents"), *found = NULL;
    int n = 0;

    assert_non_null(ev);
    for (size_t i = 0; i < ev->n; i++) {
        const dfxc_json *e = &ev->kids[i];

        if (strcmp(dfxc_json_str(e, "ph", ""), "X") == 0 && dfxc_json_num(e, "pid", -1) == pid &&
            (tid < 0 || dfxc_json_num(e, "tid", -1) == tid) &&
            strcmp(dfxc_json_str(e, "name", ""), name) == 0) {
            found = e;
            n++;
        }
    }
    if (n != 1)
        print_error("pid %d: %d slices %s, expected 1\n", pid, n, name);
    assert_int_equal(n, 1);
    return dfxc_json_get(found, "args");
}

/* args' "excluded" is exactly rank 2 on chip 2, with its death as why (from the parent). */
static void td_excluded_chip2(const dfxc_json *args)
{
    const dfxc_json *ex = dfxc_json_get(args, "excluded");

    assert_non_null(ex);
    assert_int_equal(ex->type, DFXC_JARR);
    assert_int_equal(ex->n, 1);
    assert_int_equal(dfxc_json_num(&ex->kids[0], "rank", -1), 2);
    assert_int_equal(dfxc_json_num(&ex->kids[0], "chip", -1), 2);
    if (strstr(dfxc_json_str(&ex->kids[0], "why", ""), "chip 2 (pid") == NULL ||
        strstr(dfxc_json_str(&ex->kids[0], "why", ""), "died") == NULL)
        print_error("why: \"%s\"\n", dfxc_json_str(&ex->kids[0], "why", ""));
    assert_non_null(strstr(dfxc_json_str(&ex->kids[0], "why", ""), "died"));
}

/* dfx.json's chips_missing is [2]. */
static void td_missing_chip2(const dfxc_json *d)
{
    const dfxc_json *m = dfxc_json_get(d, "chips_missing");

    assert_non_null(m);
    assert_int_equal(m->n, 1);
    assert_int_equal(m->kids[0].num, 2);
}

/*
 * With the swimlane on: chip 2 dies in the resilient loop and the survivors shrink in their
 * kernels: the run passes (the dead chip's DFX data is named missing, not an error), and the
 * merged trace.json has on each survivor's process (pids 1, 2, 4) one comm.revoke, one
 * comm.agree (status PX_OK, rank 2 on chip 2 excluded, why: its death) and one comm.shrink
 * (3 survivors, its new rank); dfx.json lists the kernel generation (members 0, 1, 3). The
 * next run shrinks from the orchestration: the same three slices on each survivor's own
 * "comm" track (tid 1000), and dfx.json the new domain's generation.
 */
static void test_shrink_dfx_spans(void **state)
{
    static const int pids[3] = {1, 2, 4};
    int shm0 = px_test_shm_plexus_entries(), fd0 = px_test_open_fds();
    dfxc_json *t, *d;
    tk_scene *s;

    (void)state;
    if (!PX_DFX)
        skip();
    px_test_mkdtemp(g_dfx_out, sizeof(g_dfx_out), "px_shrinkdfx");
    s = tk_start(TS_STAGED, NULL);
    s->die = 1u << 2;
    s->die_at = 3;
    tk_loop(s);
    t = td_load("trace.json");
    d = td_load("dfx.json");
    for (int i = 0; i < 3; i++) {
        const dfxc_json *a = td_slice(t, pids[i], -1, "comm.agree");

        assert_string_equal(dfxc_json_str(a, "status", ""), "PX_OK");
        assert_int_equal(dfxc_json_num(a, "survivors", -1), 3);
        td_excluded_chip2(a);
        a = td_slice(t, pids[i], -1, "comm.shrink");
        assert_int_equal(dfxc_json_num(a, "rank", -1), i);
        assert_int_equal(dfxc_json_num(a, "to_generation", -1), 1);
        (void)td_slice(t, pids[i], -1, "comm.revoke");
    }
    td_missing_chip2(d);
    {
        const dfxc_json *doms = dfxc_json_get(d, "domains"), *kg;

        assert_non_null(doms);
        assert_int_equal(doms->n, 1);
        kg = dfxc_json_get(&doms->kids[0], "kernel_generations");
        assert_non_null(kg);
        assert_int_equal(kg->n, 1);
        assert_int_equal(dfxc_json_get(&kg->kids[0], "members")->n, 3);
        td_excluded_chip2(&kg->kids[0]);
    }
    dfxc_json_free(t);
    dfxc_json_free(d);
    tk_check(s, (const int[]){0, 1, 3}, 3, 1); /* the orchestration's shrink, its own run */
    t = td_load("trace.json");
    d = td_load("dfx.json");
    for (int i = 0; i < 3; i++) {
        const dfxc_json *a = td_slice(t, pids[i], 1000, "comm.agree");

        td_excluded_chip2(a);
        a = td_slice(t, pids[i], 1000, "comm.shrink");
        assert_int_equal(dfxc_json_num(a, "rank", -1), i);
        assert_int_equal(dfxc_json_num(a, "survivors", -1), 3);
        (void)td_slice(t, pids[i], 1000, "comm.revoke");
    }
    td_missing_chip2(d);
    dfxc_json_free(t);
    dfxc_json_free(d);
    tk_finish(s, shm0, fd0);
    px_test_rmtree(g_dfx_out);
    g_dfx_out[0] = '\0';
}

/* Misuse: a shrunk domain refuses everything but release; shrinking it again is refused;
 * NULL arguments are refused without a crash. */
static px_status ts_misuse_orch(px_orch *o, const px_task_args *args, void *user)
{
    ts_scene *s = user;
    px_task_args a;

    (void)args;
    if (px_domain_shrink(o, s->d, NULL) != PX_EINVAL || px_domain_shrink(o, NULL, &s->nd) !=
        PX_EINVAL || px_domain_revoke(NULL) != PX_EINVAL || px_comm_revoke(NULL) != PX_EINVAL)
        return px_set_error(PX_EKERNEL, "NULL arguments were not refused");
    if (px_domain_shrink(o, s->d, &s->nd) != PX_OK)
        return PX_EKERNEL;
    px_args_init(&a);
    if (px_args_domain(&a, s->d) != PX_EREVOKED ||
        px_domain_shrink(o, s->d, &s->nd) != PX_ESTATE)
        return px_set_error(PX_EKERNEL, "a shrunk domain was used");
    return PX_OK;
}

static void test_shrunk_domain_refuses_use(void **state)
{
    int shm0 = px_test_shm_plexus_entries(), fd0 = px_test_open_fds();
    ts_scene *s = &g_s;
    px_status st;

    (void)state;
    ts_start(s, TS_DIRECT);
    st = ts_run(s, ts_misuse_orch);
    if (st != PX_OK)
        print_error("%s: %s\n", px_status_name(st), px_last_error());
    assert_int_equal(st, PX_OK);
    assert_int_equal(px_domain_chip(s->nd, 4), -1);
    assert_int_equal(px_domain_chip(NULL, 0), -1);
    assert_int_equal(px_domain_generation(NULL), -1);
    ts_finish(s, shm0, fd0);
}

/* Runs every test, or those whose names match argv[1] (a cmocka filter). */
int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_death_before_collective_direct),
        cmocka_unit_test(test_death_before_collective_staged),
        cmocka_unit_test(test_death_before_collective_mixed),
        cmocka_unit_test(test_death_during_collective_direct),
        cmocka_unit_test(test_death_during_collective_staged),
        cmocka_unit_test(test_death_during_collective_mixed),
        cmocka_unit_test(test_two_deaths_at_once),
        cmocka_unit_test(test_orphans_writes_carried_direct),
        cmocka_unit_test(test_orphans_writes_carried_staged),
        cmocka_unit_test(test_death_during_shrink),
        cmocka_unit_test(test_release_old_in_shrink_run),
        cmocka_unit_test(test_shrink_twice),
        cmocka_unit_test(test_revoke_from_orchestration),
        cmocka_unit_test(test_revoke_from_member),
        cmocka_unit_test(test_shrunk_domain_refuses_use),
        cmocka_unit_test(test_kernel_shrink_direct),
        cmocka_unit_test(test_kernel_shrink_staged),
        cmocka_unit_test(test_kernel_shrink_mixed),
        cmocka_unit_test(test_kernel_shrink_two_deaths),
        cmocka_unit_test(test_kernel_shrink_death_before_proposal),
        cmocka_unit_test(test_kernel_shrink_death_after_proposal),
        cmocka_unit_test(test_kernel_shrink_death_after_ready),
        cmocka_unit_test(test_kernel_shrink_nobody_dead_direct),
        cmocka_unit_test(test_kernel_shrink_nobody_dead_staged),
        cmocka_unit_test(test_resilient_task_fails_with_survivors),
        cmocka_unit_test(test_dead_members_last_signal_arrives),
        cmocka_unit_test(test_shrink_dfx_spans),
    };

    if (argc > 1)
        cmocka_set_test_filter(argv[1]);
    return cmocka_run_group_tests(tests, NULL, NULL);
}
