/*
 * futex.h - the futex system call on a 32-bit word. Waits are built on it by util/wait.h
 * (spin, yield, then sleep with a deadline; wakers call FUTEX_WAKE only when a waiter has
 * announced itself, so the common case costs no system call).
 */
#ifndef PX_UTIL_FUTEX_H
#define PX_UTIL_FUTEX_H

#include <stdatomic.h>
#include <stdint.h>

/* Sleeps while *w == expected, at most timeout_ns. Returns 0 on wake or value change,
 * -1 with errno ETIMEDOUT on timeout. Spurious returns are possible. shared: process-shared. */
int px_futex_wait(_Atomic uint32_t *w, uint32_t expected, int64_t timeout_ns, int shared);

/* Wakes up to n sleepers on w. */
void px_futex_wake(_Atomic uint32_t *w, int n, int shared);

/* The futex system calls this thread has made. */
typedef struct px_futex_counts {
    uint64_t waits, wakes;
} px_futex_counts;

void px_futex_counts_get(px_futex_counts *c);

static inline void px_cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

#endif
