/*
 * wait.c - the sleep phase of the one bounded wait, the CPU rule, and the wakers (wait.h).
 */
#include "util/wait.h"


int util_note_cpu(_Atomic int32_t *self)
{
    int cpu = sched_getcpu();

    if (self != NULL && atomic_load_explicit(self, memory_order_relaxed) != cpu)
        atomic_store_explicit(self, cpu, memory_order_relaxed);
    return cpu;
}

uint64_t util_wait_budget(util_wait *w, uint64_t *yield_ticks)
{
    int here;

    if (w->peer_here != NULL) {
        here = w->peer_here(w->arg);
    } else {
        int cpu = util_note_cpu(w->self_cpu);

        here = cpu >= 0 && atomic_load_explicit(w->peer_cpu, memory_order_relaxed) == cpu;
    }
    if (!here) {
        if (w->streak != NULL)
            *w->streak = 0;
        return w->spin_ticks;
    }
    if (w->streak != NULL && ++*w->streak % UTIL_WAIT_STREAK_SLEEP == 0)
        *yield_ticks = 0; /* sleep at once, so that the waker's wake-up may move this side */
    return 0; /* the waker waits for this CPU: yield it at once */
}

static void wait_announce(util_wait *w, int on)
{
    if (w->sleeping == NULL)
        return;
    if (w->count_sleepers)
        atomic_fetch_add_explicit(w->sleeping, on ? 1u : (uint32_t)-1, memory_order_seq_cst);
    else
        atomic_store_explicit(w->sleeping, on ? 1u : 0u, memory_order_seq_cst);
}

px_status util_wait_sleep(util_wait *w)
{
    uint64_t slice = w->slice_ns ? w->slice_ns : UTIL_WAIT_SLICE_NS;
    uint64_t deadline = w->deadline_ns;
    px_status st = PX_ETIMEDOUT;

    if (w->sleep_cb != NULL)
        w->sleep_cb(w->arg, 1);
    if (deadline == 0) {
        deadline = px_now_ns() + (w->timeout_ns ? w->timeout_ns : slice);
        if (w->timeout_ns)
            w->deadline_ns = deadline; /* shared by the caller's later waits */
    }
    wait_announce(w, 1);
    for (;;) {
        uint32_t v = atomic_load_explicit(w->word, memory_order_seq_cst);
        uint64_t now, left;

        if (w->ready(w->arg)) {
            st = PX_OK;
            break;
        }
        if (w->progress != NULL && w->progress(w->arg, 1))
            continue;
        now = px_now_ns();
        if (now >= deadline)
            break;
        left = deadline - now;
        w->sleeps++;
        px_futex_wait(w->word, v, (int64_t)(left < slice ? left : slice), w->shared);
        if (w->sleep_once)
            break; /* the caller looks again, spinning first */
    }
    wait_announce(w, 0);
    if (w->sleep_cb != NULL)
        w->sleep_cb(w->arg, 0);
    return st;
}
