/*
 * drain.c - the drain thread of a chip: takes ready buffers, makes their contents visible
 * through the buffer's transport, checks them, hands every entry to the collectors that
 * consume its kind, writes the host-owned header line back and recycles the buffer.
 *
 * Checks per buffer: magic, fill within capacity, a known producer; per entry: its sequence
 * number continues the buffer's, its kind is known, its records fit. Per producer the drain
 * remembers the sequence number the next buffer must start at: a buffer that starts later
 * is a gap (explained only by records the producer dropped), earlier is an error. The
 * counts feed the reconcile in dfx.c. The thread waits on a futex word with 100 ms slices
 * (a bounded wait that re-checks the stop flag), after spinning for PLEXUS_SPIN_NS; the
 * writers wake it once per batch of ready buffers. Whoever drains a buffer holds the drain
 * lock: the drain thread, or the orchestration when it found no free buffer (buffer.c), so
 * buffers are drained one at a time in the order they were published.
 */
#include "dfx/dfx_internal.h"

#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "util/clock.h"
#include "util/cpu.h"
#include "util/wait.h"
#include "util/log.h"

#define DFX_DRAIN_SLICE_NS 100000000ll

/* Records a transport failure (the first one wins) and returns 0. */
static int dfx_drain_fail(px_dfx *d, px_status st)
{
    if (d->drain_error == PX_OK) {
        d->drain_error = st;
        snprintf(d->drain_msg, sizeof(d->drain_msg), "%s", px_last_error());
    }
    return 0;
}

/* Pulls b's device-owned header line into the host view; returns 1 when it is sane. */
static int dfx_pull_header(px_dfx *d, px_dfx_buf *b)
{
    const px_dfx_block *blk = &d->block[b->coll];
    px_status st = blk->t->pull(d->chip, blk, b->off, sizeof(b->host->dev));
    const px_dfx_bufhdr *h = b->host;

    if (st != PX_OK)
        return dfx_drain_fail(d, st);
    return h->dev.magic == PX_DFX_MAGIC && h->dev.fill <= d->buf_records &&
           h->dev.producer < d->nprod;
}

/* Hands one entry to every collector that consumes its kind. */
static void dfx_deliver(px_dfx *d, const px_dfx_rec *r)
{
    int k = r->kind;

    d->collected[k]++;
    if (d->raw_kinds & (1u << k))
        dfxc_raw_add(&d->raw, r); /* once for every collector that shares the store */
    for (int i = 0; i < d->nroute[k]; i++) {
        int c = d->route[k][i];

        d->ops[c]->on_record(d->state[c], r);
    }
}

/* Walks the entries of a pulled buffer; returns the records consumed. */
static uint32_t dfx_walk(px_dfx *d, const px_dfx_bufhdr *h, px_dfx_dstate *ds)
{
    const px_dfx_rec *recs = dfx_buf_recs((px_dfx_bufhdr *)h);
    uint32_t fill = h->dev.fill, i = 0;

    while (i < fill) {
        const px_dfx_rec *r = &recs[i];

        if (r->seq != h->dev.first_seq + i || r->nrec == 0 || r->nrec > fill - i ||
            r->kind == PX_DFXK_NONE || r->kind >= PX_DFXK_COUNT) {
            ds->bad++;
            break;
        }
        dfx_deliver(d, r);
        ds->collected_records += r->nrec;
        i += r->nrec;
    }
    return i;
}

/* Sequence bookkeeping of producer ds for a buffer starting at first. */
static void dfx_check_seq(px_dfx_dstate *ds, uint32_t first, uint32_t fill)
{
    int32_t dif = (int32_t)(first - ds->expect);

    if (dif > 0)
        ds->gap_records += (uint32_t)dif;
    else if (dif < 0)
        ds->backwards++;
    ds->expect = first + fill;
}

/* Drains one ready buffer (the caller holds the drain lock and recycles it). */
static void dfx_drain_one(px_dfx *d, px_dfx_buf *b)
{
    const px_dfx_block *blk = &d->block[b->coll];
    px_dfx_bufhdr *h = b->host;
    px_dfx_dstate *ds;
    px_status st;

    if (!dfx_pull_header(d, b)) {
        d->dstate[0].bad++;
        return;
    }
    ds = &d->dstate[h->dev.producer];
    st = blk->t->pull(d->chip, blk, b->off + sizeof(*h), (size_t)h->dev.fill * sizeof(px_dfx_rec));
    if (st != PX_OK) {
        dfx_drain_fail(d, st);
        ds->bad++;
        return;
    }
    dfx_check_seq(ds, h->dev.first_seq, h->dev.fill);
    dfx_walk(d, h, ds);
    h->host.drains++;
    h->host.last_fill = h->dev.fill;
    st = blk->t->push(d->chip, blk, b->off + offsetof(px_dfx_bufhdr, host), sizeof(h->host));
    if (st != PX_OK)
        dfx_drain_fail(d, st);
}

/*
 * Takes the oldest ready buffer and drains it; the caller holds the drain lock, so buffers
 * are drained one at a time in the order they were published (each producer's in sequence).
 * Returns the buffer, to be recycled, or NULL when none is ready.
 */
static px_dfx_buf *dfx_drain_next(px_dfx *d)
{
    px_dfx_buf *b = px_mpmcq_pop(&d->readyq);

    if (b == NULL)
        return NULL;
    atomic_fetch_add_explicit(&d->taken, 1, memory_order_seq_cst);
    dfx_drain_one(d, b);
    return b;
}

/*
 * Wakes the drain thread if it sleeps (see dfx_internal.h). The waker clears the drain's
 * flag, so that the writers that publish before the woken drain gets a CPU do not each make
 * a system call of their own; the drain announces its next sleep again (util/wait.h).
 */
void dfx_drain_kick(px_dfx *d, px_dfx_prod *pr)
{
    if (util_wake_take(&d->ready_seq, &d->drain_sleeping, 1, 0))
        pr->drain_wakes++;
}

/* Returns the buffers a host-side writer drained (see dfx_internal.h). */
uint32_t dfx_drain_help(px_dfx *d, px_dfx_prod *pr, int wait)
{
    uint32_t n = 0;
    px_dfx_buf *b;

    if (wait)
        pthread_mutex_lock(&d->drain_lock);
    else if (pthread_mutex_trylock(&d->drain_lock) != 0)
        return 0; /* the drain thread is draining: it recycles a buffer soon */
    while (!atomic_load_explicit(&d->stop, memory_order_acquire) && n < d->nbufs &&
           (b = dfx_drain_next(d)) != NULL) {
        dfx_buf_recycle(d, b);
        n++;
    }
    if (pr != NULL)
        pr->helped += n;
    else
        d->finish_drained += n;
    pthread_mutex_unlock(&d->drain_lock);
    return n;
}

/* ready() of the drain's wait: a ready buffer that no drainer took yet, or told to stop. */
static int dfx_drain_ready(void *arg)
{
    px_dfx *d = arg;

    return (dfx_pending(d) > 0 && !atomic_load_explicit(&d->drain_held, memory_order_relaxed)) ||
           atomic_load_explicit(&d->stop, memory_order_acquire);
}

/* Holds or releases the drain thread (tests; see dfx_internal.h). */
void dfx_drain_hold(px_dfx *d, int on)
{
    atomic_store_explicit(&d->drain_held, on != 0, memory_order_seq_cst);
    if (!on)
        util_wake(&d->ready_seq, NULL, 1, 0); /* no bump: ready_seq counts published buffers */
}

/*
 * Waits for a ready buffer: spin, then sleep in slices (util/wait.h, no yield phase). The
 * publishers wake a sleeping drain only once d->wake_batch buffers are ready (or a writer
 * is about to run out), so the drain wakes once per batch, not per buffer; a sleeping drain
 * also looks again every slice.
 */
static void dfx_drain_wait(px_dfx *d)
{
    util_wait w = {.ready = dfx_drain_ready, .arg = d, .word = &d->ready_seq,
                   .sleeping = &d->drain_sleeping, .spin_ticks = d->spin_ticks,
                   .slice_ns = DFX_DRAIN_SLICE_NS, .sleep_once = 1};

    while (util_wait_run(&w) != PX_OK)
        d->dwait.sleeps += w.sleeps; /* a slice passed, or woken early: look again */
    d->dwait.sleeps += w.sleeps;
}

static void *dfx_drain_main(void *arg)
{
    px_dfx *d = arg;
    px_dfx_buf *b;

    for (;;) {
        dfx_drain_wait(d);
        pthread_mutex_lock(&d->drain_lock);
        b = dfx_drain_next(d);
        pthread_mutex_unlock(&d->drain_lock);
        if (b != NULL) {
            d->dwait.buffers++;
            d->dwait.same_cpu += b->pub_cpu >= 0 && b->pub_cpu == sched_getcpu();
            dfx_buf_recycle(d, b);
        } else if (atomic_load_explicit(&d->stop, memory_order_acquire)) {
            break; /* stopped and nothing left */
        } else {
            px_cpu_relax(); /* an earlier push is still completing (mpmcq.h) */
        }
    }
    {
        struct timespec ts;

        if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts) == 0) /* read after the join */
            d->drain_cpu_ns = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
    }
    return NULL;
}

/* Returns PX_OK, or PX_ENOMEM when the thread cannot start. */
px_status dfx_drain_start(px_dfx *d)
{
    int rc = pthread_mutex_init(&d->drain_lock, NULL);

    if (rc == 0) {
        d->drain_lock_init = 1;
        d->wake_batch = d->nbufs > (uint32_t)d->nprod + 1 ? (d->nbufs - (uint32_t)d->nprod) / 2
                                                          : 1;
        rc = pthread_create(&d->drain, NULL, dfx_drain_main, d);
    }
    if (rc == 0)
        pthread_setname_np(d->drain, "px-dfx-drain"); /* for top, perf and the tests */
    if (rc == 0 && d->drain_cpu >= 0) {
        char who[48];

        snprintf(who, sizeof(who), "the DFX drain of chip %d", d->chip_index);
        util_bind_thread(d->drain, d->drain_cpu, who);
    }
    if (rc != 0)
        return px_set_error(PX_ENOMEM, "dfx: cannot start the drain thread of chip %d: %s",
                            d->chip_index, strerror(rc));
    d->drain_started = 1;
    return PX_OK;
}

/* Stops the drain after it emptied the ready queue, and joins it. */
void dfx_drain_stop(px_dfx *d)
{
    if (!d->drain_started)
        return;
    atomic_store_explicit(&d->stop, 1, memory_order_seq_cst);
    util_bump_wake(&d->ready_seq, NULL, 1, 0);
    pthread_join(d->drain, NULL);
    d->drain_started = 0;
}

/* Frees the drain lock (the thread has stopped). */
void dfx_drain_fini(px_dfx *d)
{
    if (d->drain_lock_init)
        pthread_mutex_destroy(&d->drain_lock);
    d->drain_lock_init = 0;
}
