/*
 * mailbox.c - shared regions, publishing calls and completions, and the level-3 waits (see
 * mailbox.h for the protocol), written on the one wait helper (util/wait.h).
 *
 * The lost-wakeup window is closed the same way as in the level-2 runtime: the waiter stores
 * its "sleeping" flag and then re-reads the word, the poster changes the word and then reads
 * the flag, all sequentially consistent, so at least one of them sees the other.
 */
#include "hier/mailbox.h"

#include <errno.h>
#include <limits.h>
#include <sched.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util/clock.h"
#include "util/wait.h"

px_status px_mb_region_create(const char *name, size_t bytes, void **mem, size_t *len, int *fd)
{
    long page = sysconf(_SC_PAGESIZE);
    size_t n = (size_t)px_align_up(bytes, page > 0 ? (uint64_t)page : 4096);
    int f = memfd_create(name, MFD_CLOEXEC);
    void *p;

    if (f < 0)
        return px_set_error(PX_ENOMEM, "level 3: memfd_create(\"%s\") for a shared region of "
                            "%zu bytes failed: %s", name, n, strerror(errno));
    if (fchmod(f, 0600) != 0 || ftruncate(f, (off_t)n) != 0) {
        px_set_error(PX_ENOMEM, "level 3: mode 0600 / sizing shared region \"%s\" to %zu bytes "
                     "failed: %s", name, n, strerror(errno));
        goto out_close_fd;
    }
    p = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_SHARED, f, 0);
    if (p == MAP_FAILED) {
        px_set_error(PX_ENOMEM, "level 3: mapping shared region \"%s\" (%zu bytes) failed: %s",
                     name, n, strerror(errno));
        goto out_close_fd;
    }
    *mem = p;
    *len = n;
    *fd = f;
    return PX_OK;

out_close_fd:
    close(f);
    return PX_ENOMEM;
}

void px_mb_region_destroy(void *mem, size_t len, int fd)
{
    if (mem != NULL)
        munmap(mem, len);
    if (fd >= 0)
        close(fd);
}

void px_mb_bump(_Atomic uint32_t *word, _Atomic uint32_t *sleeping)
{
    util_bump_wake(word, sleeping, INT_MAX, 1);
}

void px_mb_advance(_Atomic uint64_t *head, uint64_t value, _Atomic uint32_t *seq,
                   _Atomic uint32_t *sleeping)
{
    atomic_store_explicit(head, value, memory_order_seq_cst);
    if (atomic_load_explicit(sleeping, memory_order_seq_cst))
        util_bump_wake(seq, NULL, INT_MAX, 1);
}

/* Asks for the lines of *p (n bytes) in exclusive state ahead of writing them: the other
 * process read them a ring ago, and a store that must fetch them holds up the publishing
 * store behind it. */
static void px_mb_prefetch_w(const void *p, size_t n)
{
    for (size_t off = 0; off < n; off += PX_CACHELINE) {
#if defined(__x86_64__)
        /* PREFETCHW (a no-op where unsupported); __builtin_prefetch(p, 1) emits a plain read
         * prefetch unless the build targets a CPU that has it */
        __asm__ volatile("prefetchw %0" : : "m"(*((const char *)p + off)));
#else
        __builtin_prefetch((const char *)p + off, 1, 3);
#endif
    }
}

/* A packed argument: px_arg's four header bytes and the tensor's dtype (0 for a scalar), then
 * a scalar's 8 bytes, or a tensor's ndim, address and offset followed by its ndim extents
 * and ndim strides. */
typedef struct px_mb_packed {
    uint8_t hdr[4];
    int32_t dtype;
} px_mb_packed;

typedef struct px_mb_packed_tensor {
    int32_t ndim;
    int32_t pad;
    void *addr;
    int64_t offset;
} px_mb_packed_tensor;

void px_mb_pack_args(px_mb_call *c, const px_task_args *a)
{
    unsigned char *out = c->args;

    for (int i = 0; i < a->n; i++) {
        const px_arg *arg = &a->a[i];
        px_mb_packed *p = (px_mb_packed *)out;
        px_mb_packed_tensor *t = (px_mb_packed_tensor *)(p + 1);
        int64_t *dims = (int64_t *)(t + 1);
        int nd;

        memcpy(p->hdr, arg, sizeof(p->hdr));
        if (arg->tag == PX_TAG_SCALAR) {
            p->dtype = 0;
            memcpy(p + 1, &arg->v.u64, sizeof(uint64_t));
            out += sizeof(*p) + sizeof(uint64_t);
            continue;
        }
        /* checked at submit; clamped so that a slot can never overflow */
        nd = PX_MAX(0, PX_MIN(arg->v.t.ndim, PX_MAX_DIMS));
        p->dtype = (int32_t)arg->v.t.dtype;
        t->ndim = nd;
        t->pad = 0;
        t->addr = arg->v.t.addr;
        t->offset = arg->v.t.offset;
        memcpy(dims, arg->v.t.shape, (size_t)nd * sizeof(int64_t));
        memcpy(dims + nd, arg->v.t.stride, (size_t)nd * sizeof(int64_t));
        out = (unsigned char *)(dims + 2 * nd);
    }
    c->nargs = a->n;
    c->bytes = (uint32_t)(out - c->args);
}

int px_mb_unpack_args(const px_mb_call *c, px_task_args *a)
{
    const unsigned char *in = c->args, *end;

    if (c->nargs < 0 || c->nargs > PX_MAX_ARGS || c->bytes > PX_MB_ARGS_MAX)
        return -1;
    end = c->args + c->bytes;
    a->n = c->nargs;
    a->overflow = 0;
    for (int i = 0; i < c->nargs; i++) {
        px_arg *arg = &a->a[i];
        const px_mb_packed *p = (const px_mb_packed *)in;
        const px_mb_packed_tensor *t = (const px_mb_packed_tensor *)(p + 1);
        const int64_t *dims = (const int64_t *)(t + 1);
        size_t left = (size_t)(end - in);

        memset(arg, 0, sizeof(*arg));
        if (left < sizeof(*p) + sizeof(uint64_t))
            return -1;
        memcpy(arg, p->hdr, sizeof(p->hdr));
        if (arg->tag == PX_TAG_SCALAR) {
            memcpy(&arg->v.u64, p + 1, sizeof(uint64_t));
            in += sizeof(*p) + sizeof(uint64_t);
            continue;
        }
        /* a child trusts the parent, but a bad extent count must not write past shape[] */
        if (left < sizeof(*p) + sizeof(*t) || t->ndim < 0 || t->ndim > PX_MAX_DIMS ||
            left < sizeof(*p) + sizeof(*t) + 2 * (size_t)t->ndim * sizeof(int64_t))
            return -1;
        arg->v.t.dtype = (px_dtype)p->dtype;
        arg->v.t.ndim = t->ndim;
        arg->v.t.addr = t->addr;
        arg->v.t.offset = t->offset;
        memcpy(arg->v.t.shape, dims, (size_t)t->ndim * sizeof(int64_t));
        memcpy(arg->v.t.stride, dims + t->ndim, (size_t)t->ndim * sizeof(int64_t));
        in = (const unsigned char *)(dims + 2 * t->ndim);
    }
    return 0;
}

void px_mb_publish_call(px_mailbox *mb, uint64_t head)
{
    px_mb_advance(&mb->call_head, head + 1, &mb->call_seq, &mb->child_sleeping);
    /* the header and the first packed arguments of the next call: two lines */
    px_mb_prefetch_w(&mb->calls[(head + 1) % PX_MB_DEPTH], 2 * PX_CACHELINE);
}

/* The orchestration, when it stops polling, looks at every done_head after lowering the
 * flag (src/hier/watch.c): a completion it would miss found the flag down here. */
void px_mb_publish_done(px_mailbox *mb, uint64_t head, px_doorbell *bell)
{
    atomic_store_explicit(&mb->done_head, head + 1, memory_order_seq_cst);
    if (!atomic_load_explicit(&bell->polling, memory_order_seq_cst))
        px_mb_bump(&bell->seq, &bell->sleeping);
    px_mb_prefetch_w(&mb->dones[(head + 1) % PX_MB_DEPTH], offsetof(px_mb_done, msg) + 1);
}

/* ready() of px_mb_wait: the word moved off the value seen. */
typedef struct mb_word_wait {
    _Atomic uint32_t *word;
    uint32_t seen, v;
} mb_word_wait;

static int mb_word_moved(void *arg)
{
    mb_word_wait *m = arg;

    m->v = atomic_load_explicit(m->word, memory_order_seq_cst);
    return m->v != m->seen;
}

uint32_t px_mb_wait(_Atomic uint32_t *word, uint32_t seen, _Atomic uint32_t *sleeping,
                    uint64_t spin_ticks, uint64_t yield_ticks, uint64_t deadline_ns)
{
    mb_word_wait m = {.word = word, .seen = seen};
    util_wait w = {.ready = mb_word_moved, .arg = &m, .word = word, .sleeping = sleeping,
                   .shared = 1, .spin_ticks = spin_ticks, .yield_ticks = yield_ticks,
                   .deadline_ns = deadline_ns};

    util_wait_run(&w);
    return m.v;
}

int px_mb_note_cpu(_Atomic int32_t *self)
{
    return util_note_cpu(self);
}

/* ready() of px_mb_wait_head: the head moved past pos. */
typedef struct mb_head_wait {
    _Atomic uint64_t *head;
    uint64_t pos;
} mb_head_wait;

static int mb_head_moved(void *arg)
{
    const mb_head_wait *m = arg;

    return atomic_load_explicit(m->head, memory_order_seq_cst) > m->pos;
}

int px_mb_wait_head(_Atomic uint64_t *head, uint64_t pos, _Atomic uint32_t *seq,
                    _Atomic uint32_t *sleeping, px_mb_cpus cpus, uint64_t spin_ticks,
                    uint64_t yield_ticks, uint64_t deadline_ns)
{
    mb_head_wait m = {.head = head, .pos = pos};
    util_wait w = {.ready = mb_head_moved, .arg = &m, .word = seq, .sleeping = sleeping,
                   .shared = 1, .spin_ticks = spin_ticks, .yield_ticks = yield_ticks,
                   .deadline_ns = deadline_ns, .self_cpu = cpus.self, .peer_cpu = cpus.peer,
                   .streak = cpus.shared};

    if (atomic_load_explicit(head, memory_order_acquire) > pos)
        return 1;
    if (cpus.peer == NULL) /* no rule: publish this side's CPU all the same */
        util_note_cpu(cpus.self);
    return util_wait_run(&w) == PX_OK;
}
