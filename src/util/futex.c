/*
 * futex.c - thin wrappers over the futex system call, counting the calls of each thread (the
 * wait helper's tests check that a wake with nobody asleep makes none).
 */
#include "futex.h"

#include <errno.h>
#include <linux/futex.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static _Thread_local px_futex_counts px_futex_calls;

void px_futex_counts_get(px_futex_counts *c)
{
    *c = px_futex_calls;
}

int px_futex_wait(_Atomic uint32_t *w, uint32_t expected, int64_t timeout_ns, int shared)
{
    struct timespec ts;
    int op = shared ? FUTEX_WAIT : FUTEX_WAIT_PRIVATE;
    long r;

    if (timeout_ns < 0)
        timeout_ns = 0;
    ts.tv_sec = (time_t)(timeout_ns / 1000000000);
    ts.tv_nsec = (long)(timeout_ns % 1000000000);
    px_futex_calls.waits++;
    r = syscall(SYS_futex, (uint32_t *)w, op, expected, &ts, NULL, 0);
    if (r == -1 && errno == ETIMEDOUT)
        return -1;
    return 0;
}

void px_futex_wake(_Atomic uint32_t *w, int n, int shared)
{
    int op = shared ? FUTEX_WAKE : FUTEX_WAKE_PRIVATE;

    px_futex_calls.wakes++;
    syscall(SYS_futex, (uint32_t *)w, op, n, NULL, NULL, 0);
}
