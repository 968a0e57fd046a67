/*
 * buffer.c - paired buffers, the chip's free and ready queues, and back-pressure.
 *
 * Each enabled collector contributes a block of buffers (its transport chose the memory);
 * every buffer of every block joins one pool per chip. A producer writes records into its
 * current buffer's device view; when it is full the producer publishes it (device-owned
 * header line: fill, first seq, producer) to the ready queue, waking a sleeping drain once a
 * batch of buffers is ready (drain.c), and takes one from the free queue. With no free buffer
 * the orchestration (host side) drains the ready buffers itself unless the drain thread is
 * draining at that moment; a core, or an orchestration that found the drain busy, waits: it
 * spins for PLEXUS_SPIN_NS, then sleeps on
 * the free queue's futex word, and counts the wait. Only after PLEXUS_DFX_BACKSTOP_S does it
 * drop the entry (counted per kind, its sequence numbers skipped so the drain sees the gap);
 * it keeps dropping without waiting until a buffer is free again.
 */
#include "dfx/dfx_internal.h"

#include <limits.h>
#include <sched.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "util/clock.h"
#include "util/wait.h"
#include "util/log.h"

#define DFX_WAIT_SLICE_NS 100000000ll

static uint64_t dfx_pow2(uint64_t n)
{
    uint64_t c = 1;

    while (c < n)
        c <<= 1;
    return c;
}

/* Zeroes the host-owned header line of b and writes it to the device. */
static px_status dfx_buf_init(px_dfx *d, px_dfx_buf *b)
{
    const px_dfx_block *blk = &d->block[b->coll];

    memset(&b->host->host, 0, sizeof(b->host->host));
    return blk->t->push(d->chip, blk, b->off + offsetof(px_dfx_bufhdr, host),
                        sizeof(b->host->host));
}

/* Returns PX_OK, or PX_ENOMEM / a transport error (see dfx_internal.h). */
px_status dfx_pool_init(px_dfx *d)
{
    uint32_t n = 0;
    px_status st;

    for (int c = 0; c < PX_DFX_NCOLLECTORS; c++)
        n += d->block[c].t ? d->need[c].nbuffers : 0;
    d->bufs = calloc(n, sizeof(*d->bufs));
    if (d->bufs == NULL || px_mpmcq_init(&d->freeq, dfx_pow2(n)) != 0 ||
        px_mpmcq_init(&d->readyq, dfx_pow2(n)) != 0)
        return px_set_error(PX_ENOMEM, "dfx: out of host memory for %u buffer descriptors", n);
    for (int c = 0; c < PX_DFX_NCOLLECTORS; c++) {
        const px_dfx_block *blk = &d->block[c];

        for (uint32_t j = 0; blk->t != NULL && j < d->need[c].nbuffers; j++) {
            px_dfx_buf *b = &d->bufs[d->nbufs++];

            b->off = (size_t)j * d->need[c].buffer_bytes;
            b->dev = (px_dfx_bufhdr *)(void *)(blk->dev + b->off);
            b->host = (px_dfx_bufhdr *)(void *)(blk->host + b->off);
            b->coll = c;
            if ((st = dfx_buf_init(d, b)) != PX_OK)
                return st;
            px_mpmcq_push(&d->freeq, b);
        }
    }
    return PX_OK;
}

/* Frees the descriptors and queues. */
void dfx_pool_fini(px_dfx *d)
{
    if (d->freeq.cells)
        px_mpmcq_fini(&d->freeq);
    if (d->readyq.cells)
        px_mpmcq_fini(&d->readyq);
    free(d->bufs);
    d->bufs = NULL;
}

/* Returns b to the free queue and wakes writers that sleep waiting for one. */
void dfx_buf_recycle(px_dfx *d, px_dfx_buf *b)
{
    px_mpmcq_push(&d->freeq, b);
    util_bump_wake(&d->free_seq, &d->free_waiters, INT_MAX, 0);
}

static void dfx_detach(px_dfx_prod *pr)
{
    pr->cur = NULL;
    pr->p.buf = NULL;
    pr->p.cur = pr->p.end = NULL;
}

/* Publishes the producer's current buffer: device-owned header line, then the ready queue. */
static void dfx_publish(px_dfx *d, px_dfx_prod *pr)
{
    px_dfx_buf *b = pr->cur;
    px_dfx_bufhdr *h = b->dev;
    uint32_t fill = (uint32_t)(pr->p.cur - dfx_buf_recs(h)), seq;

    dfx_detach(pr);
    if (fill == 0) {
        dfx_buf_recycle(d, b);
        return;
    }
    h->dev.magic = PX_DFX_MAGIC;
    h->dev.fill = fill;
    h->dev.first_seq = pr->first_seq;
    h->dev.capacity = d->buf_records;
    h->dev.producer = pr->p.id;
    h->dev.chip = (uint16_t)d->chip_index;
    h->dev.publishes++;
    b->pub_cpu = sched_getcpu();
    pr->publishes++;
    px_mpmcq_push(&d->readyq, b);
    seq = atomic_fetch_add_explicit(&d->ready_seq, 1, memory_order_seq_cst) + 1;
    /* a sleeping drain is woken once per batch of ready buffers, not for each one */
    if ((int32_t)(seq - atomic_load_explicit(&d->taken, memory_order_seq_cst)) >=
        (int32_t)d->wake_batch)
        dfx_drain_kick(d, pr);
}

/* Makes b the producer's current buffer. */
static void dfx_take(px_dfx *d, px_dfx_prod *pr, px_dfx_buf *b)
{
    pr->cur = b;
    pr->p.buf = b;
    pr->p.cur = dfx_buf_recs(b->dev);
    pr->p.end = pr->p.cur + d->buf_records;
    pr->first_seq = pr->p.seq;
    pr->dropping = 0;
}

/* Drops an entry: counted per kind, its sequence numbers skipped. Returns NULL. */
static px_dfx_rec *dfx_drop(px_dfx_prod *pr, px_dfx_kind kind, uint32_t need)
{
    pr->dropped[kind]++;
    pr->p.produced[kind]++;
    pr->dropped_records += need;
    pr->p.seq += need;
    return NULL;
}

/* ready() of a writer's wait: a free buffer popped. */
typedef struct dfx_free_waiting {
    px_dfx *d;
    px_dfx_buf *b;
} dfx_free_waiting;

static int dfx_free_ready(void *arg)
{
    dfx_free_waiting *c = arg;

    return (c->b = px_mpmcq_pop(&c->d->freeq)) != NULL;
}

/* Waits (counted) for a free buffer: spin, then sleep on the free queue's word until the
 * backstop (util/wait.h, no yield phase). NULL: drop. */
static px_dfx_buf *dfx_wait_free(px_dfx *d, px_dfx_prod *pr, px_dfx_kind kind)
{
    dfx_free_waiting c = {.d = d};
    util_wait w = {.ready = dfx_free_ready, .arg = &c, .word = &d->free_seq,
                   .sleeping = &d->free_waiters, .count_sleepers = 1,
                   .spin_ticks = d->spin_ticks, .timeout_ns = d->backstop_ns,
                   .deadline_ns = d->backstop_ns ? 0 : 1, /* no backstop: past at once */
                   .slice_ns = DFX_WAIT_SLICE_NS};
    px_dfx_buf *b;
    uint64_t t0;

    if (pr->dropping)
        return NULL;
    pr->waits[kind]++;
    t0 = px_now_ns();
    b = util_wait_run(&w) == PX_OK ? c.b : NULL;
    pr->wait_ns += px_now_ns() - t0;
    pr->wait_sleeps += w.sleeps;
    if (b == NULL) {
        pr->backstops++;
        pr->dropping = 1;
        PX_LOG_WARN("dfx: %s waited %.3g s for a free DFX buffer (PLEXUS_DFX_BACKSTOP_S) and "
                    "drops records until the drain catches up; raise PLEXUS_DFX_BUFFERS",
                    d->producer_names[pr->p.id], (double)d->backstop_ns / 1e9);
    }
    return b;
}

/* Returns the first free record of a fresh buffer, or NULL when the entry is dropped. */
px_dfx_rec *px_dfx_next_buffer(px_dfx_producer *p, px_dfx_kind kind, uint32_t need)
{
    px_dfx_prod *pr = (px_dfx_prod *)p;
    px_dfx *d = p->dfx;
    px_dfx_buf *b;

    if (pr->cur != NULL)
        dfx_publish(d, pr);
    if (need > d->buf_records || need > PX_DFX_MAX_NREC)
        return dfx_drop(pr, kind, need);
    b = px_mpmcq_pop(&d->freeq);
    if (b == NULL) {
        /* about to run out: the drain must be awake (it may sleep until a batch is ready);
         * a host-side writer drains the ready buffers itself rather than wait for a drain
         * thread that the scheduler keeps off the CPUs */
        dfx_drain_kick(d, pr);
        if (pr->host_side && dfx_drain_help(d, pr, 0) > 0)
            b = px_mpmcq_pop(&d->freeq);
    }
    if (b == NULL)
        b = dfx_wait_free(d, pr, kind);
    if (b == NULL)
        return dfx_drop(pr, kind, need);
    dfx_take(d, pr, b);
    return p->cur;
}

/* Publishes pr's partial buffer, if it has one (end of run). */
void dfx_flush_producer(px_dfx *d, px_dfx_prod *pr)
{
    if (pr->cur != NULL)
        dfx_publish(d, pr);
}
