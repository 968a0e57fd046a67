/*
 * clock.c - one-time calibration of the cycle counter against CLOCK_MONOTONIC.
 */
#include "clock.h"

#include <pthread.h>

static double px_tpn = 1.0;
static pthread_once_t px_tpn_once = PTHREAD_ONCE_INIT;

static void px_calibrate(void)
{
#if defined(__x86_64__)
    uint64_t t0 = px_now_ns(), c0 = px_ticks(), t1, c1;

    do {
        t1 = px_now_ns();
    } while (t1 - t0 < 5000000);
    c1 = px_ticks();
    if (c1 > c0)
        px_tpn = (double)(c1 - c0) / (double)(t1 - t0);
#endif
}

double px_ticks_per_ns(void)
{
    pthread_once(&px_tpn_once, px_calibrate);
    return px_tpn;
}

uint64_t px_ns_to_ticks(uint64_t ns)
{
    return (uint64_t)((double)ns * px_ticks_per_ns());
}
