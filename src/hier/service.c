/*
 * service.c - chip services and the chip context: what runs inside a chip process besides
 * its main loop.
 *
 * Every chip process has a context (hier_chip): its index and pid, its mailbox, its end of
 * the socketpair, its level-2 engine, its descriptor table (fdpass.c) and its service
 * thread. The service thread answers the control calls of the service route (ctl.c): it
 * sleeps on the control ring's futex word and runs each call's handler at once, so a chip
 * answers while its main thread (core 0) is inside a kernel. Services registered by upper
 * layers before px_worker_init start in registration order after the engine is built, before
 * the service thread starts (so their handlers see what start() set up) and before the chip
 * reports ready (a failing start fails the chip's start-up with its message); they stop in
 * reverse order when the chip leaves, after the service thread has stopped.
 */
#include "hier/hier_internal.h"

#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "util/log.h"
#include "util/wait.h"

#define HIER_SERVICE_SLICE_NS 100000000ull /* the service thread checks its parent this often */

static hier_chip *hier_self; /* this process's chip, or NULL */

hier_chip *hier_chip_self(void)
{
    return hier_self;
}

int hier_chip_index(const hier_chip *chip)
{
    return chip != NULL ? chip->index : -1;
}

void hier_chip_blame(hier_chip *chip, int peer)
{
    if (chip != NULL && peer >= 0 && peer < HIER_DEATHS_MAX && peer != chip->index)
        atomic_fetch_or_explicit(&chip->silent, 1ull << peer, memory_order_relaxed);
}

int hier_blame(int peer)
{
    hier_chip_blame(hier_chip_self(), peer);
    return hier_chip_self() != NULL;
}

px_worker *hier_chip_engine(hier_chip *chip)
{
    return chip != NULL ? chip->engine : NULL;
}

const hier_deaths *hier_chip_deaths(hier_chip *chip)
{
    return chip != NULL ? chip->h->deaths : NULL;
}

const hier_deaths *hier_deaths_board(px_worker *w)
{
    px_hier *h = w != NULL && w->level == 3 ? px_hier_of(w) : NULL;

    return h != NULL ? h->deaths : NULL;
}

char hier_xproc_token;

int px_chip_index(void)
{
    return hier_self != NULL ? hier_self->index : -1;
}

px_status hier_service_register(px_worker *w, const char *name, hier_service_start_cb start,
                                hier_service_stop_cb stop, void *arg)
{
    px_hier *h;

    if (w == NULL || w->level != 3 || (h = px_hier_of(w)) == NULL)
        return px_set_error(PX_EINVAL, "chip service \"%s\": services run in the chips of a "
                            "level-3 worker only", name ? name : "(null)");
    if (name == NULL || name[0] == '\0' || strlen(name) >= PX_KERNEL_NAME_MAX)
        return px_set_error(PX_EINVAL, "chip service name \"%s\" must have 1..%d characters",
                            name ? name : "(null)", PX_KERNEL_NAME_MAX - 1);
    if (h->state != PX_HIER_CREATED)
        return px_set_error(PX_ESTATE, "chip service \"%s\": the chips were forked by "
                            "px_worker_init already; register it before px_worker_init", name);
    for (int i = 0; i < h->nservices; i++)
        if (strcmp(h->services[i].name, name) == 0)
            return px_set_error(PX_EINVAL, "chip service \"%s\" is registered already", name);
    if (h->nservices == HIER_SERVICE_MAX)
        return px_set_error(PX_ENOMEM, "cannot register chip service \"%s\": %d services "
                            "already", name, HIER_SERVICE_MAX);
    snprintf(h->services[h->nservices].name, PX_KERNEL_NAME_MAX, "%s", name);
    h->services[h->nservices].start = start;
    h->services[h->nservices].stop = stop;
    h->services[h->nservices].arg = arg;
    h->nservices++;
    return PX_OK;
}

/* ready() of the service thread's wait: a call at position tail, or the end. */
typedef struct chip_service_wait_arg {
    hier_chip *chip;
    uint64_t tail;
    int end;            /* told to stop, or the parent is gone */
} chip_service_wait_arg;

static int chip_service_ready(void *arg)
{
    chip_service_wait_arg *a = arg;
    hier_chip *chip = a->chip;

    if (atomic_load_explicit(&chip->mb->ctl_head, memory_order_seq_cst) > a->tail)
        return 1;
    a->end = atomic_load_explicit(&chip->stop, memory_order_seq_cst) ||
             getppid() != chip->h->parent_pid;
    return a->end;
}

/* Waits until control call `tail` is posted; returns 0 then, -1 when told to stop or when
 * the parent is gone. A control call is rare: the thread sleeps at once (no spin, no
 * yield), in slices of 100 ms that re-check the parent. */
static int chip_service_wait(hier_chip *chip, uint64_t tail)
{
    chip_service_wait_arg a = {.chip = chip, .tail = tail};
    util_wait w = {.ready = chip_service_ready, .arg = &a, .word = &chip->mb->ctl_seq,
                   .sleeping = &chip->mb->ctl_sleeping, .shared = 1,
                   .slice_ns = HIER_SERVICE_SLICE_NS};

    while (util_wait_run(&w) != PX_OK)
        continue; /* a slice passed: sleep again */
    return a.end ? -1 : 0;
}

/* The service thread: answers the control ring in order. */
static void *chip_service_main(void *arg)
{
    hier_chip *chip = arg;
    px_mailbox *mb = chip->mb;

    for (uint64_t tail = 0;; tail++) {
        if (chip_service_wait(chip, tail) != 0)
            break;
        hier_ctl_run(chip, &mb->ctl_calls[tail % PX_MB_CTL_DEPTH],
                     &mb->ctl_dones[tail % PX_MB_CTL_DEPTH]);
        atomic_store_explicit(&mb->ctl_done_head, tail + 1, memory_order_seq_cst);
        px_mb_bump(&chip->h->bell->seq, &chip->h->bell->sleeping); /* always: answers are rare */
    }
    return NULL;
}

px_status hier_chip_start(hier_chip *chip)
{
    px_hier *h = chip->h;
    int rc;

    for (int i = 0; i < HIER_CHIP_FDS; i++)
        chip->fds[i].fd = -1;
    pthread_mutex_init(&chip->fd_lock, NULL);
    hier_self = chip;
    /* the services first: what start() sets up is there before any handler runs (the thread
     * starts after it) */
    for (; chip->nstarted < h->nservices; chip->nstarted++) {
        const hier_service *s = &h->services[chip->nstarted];
        px_status st = s->start != NULL ? s->start(chip, s->arg) : PX_OK;

        if (st != PX_OK) {
            char msg[PX_ERRMSG_MAX];

            snprintf(msg, sizeof(msg), "%s", px_last_error());
            return px_set_error(st, "chip %d: service \"%s\" did not start: %s", chip->index,
                                s->name, msg);
        }
    }
    rc = pthread_create(&chip->service, NULL, chip_service_main, chip);
    if (rc != 0)
        return px_set_error(PX_ENOMEM, "chip %d: cannot start its service thread: %s",
                            chip->index, strerror(rc));
    chip->service_started = 1;
    return PX_OK;
}

void hier_chip_stop(hier_chip *chip)
{
    px_hier *h = chip->h;

    if (chip->service_started) {
        atomic_store_explicit(&chip->stop, 1, memory_order_seq_cst);
        util_bump_wake(&chip->mb->ctl_seq, &chip->mb->ctl_sleeping, INT_MAX, 1);
        pthread_join(chip->service, NULL);
        chip->service_started = 0;
    }
    while (chip->nstarted > 0) {
        const hier_service *s = &h->services[--chip->nstarted];

        if (s->stop != NULL)
            s->stop(chip, s->arg);
    }
    pthread_mutex_lock(&chip->fd_lock);
    for (int i = 0; i < HIER_CHIP_FDS; i++) {
        if (chip->fds[i].fd >= 0)
            close(chip->fds[i].fd);
        chip->fds[i].fd = -1;
    }
    pthread_mutex_unlock(&chip->fd_lock);
}
