/*
 * clock.h - time: monotonic nanoseconds and a cheap cycle counter for bounded spins.
 *
 * px_now_ns() is CLOCK_MONOTONIC. px_ticks() is the TSC on x86 (clock_gettime elsewhere);
 * px_ticks_per_ns() is calibrated once, so a spin bound costs one rdtsc per check.
 */
#ifndef PX_UTIL_CLOCK_H
#define PX_UTIL_CLOCK_H

#include <stdint.h>
#include <time.h>

static inline uint64_t px_now_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static inline uint64_t px_ticks(void)
{
#if defined(__x86_64__)
    return __builtin_ia32_rdtsc();
#else
    return px_now_ns();
#endif
}

/* Ticks per nanosecond (calibrated on first use, about 10 ms); 1.0 without a TSC. */
double px_ticks_per_ns(void);

/* Converts a duration in ns to ticks. */
uint64_t px_ns_to_ticks(uint64_t ns);

#endif
