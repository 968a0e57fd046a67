/*
 * fault.h - faults a level-3 chip inflicts on itself at a named point of its work (tests only).
 *
 * A test that kills or stops a process while a job runs races the job: a short job may end
 * before the signal lands, and the test then checks nothing (or fails for no defect). With
 * PLEXUS_TEST_FAULT the fault lands at a point of the work the test names, whatever the speed
 * of the machine:
 *
 *   PLEXUS_TEST_FAULT=[host:H:]chip:C:ACTION:POINT:N
 *
 *   host:H  the job's host (MPI rank of the worker, from the launcher's environment); absent:
 *           host 0 (and the only host of a job without MPI)
 *   chip:C  the chip (its index in its worker) that does it
 *   ACTION  kill (SIGKILL to itself), stop (SIGSTOP to itself), kill-worker or stop-worker
 *           (the same to its worker, the parent process)
 *   POINT:N coll:N at the chip's N-th collective (barriers included, any domain, counted from
 *           1 as it enters); call:N when the chip starts the N-th call its worker posts
 *           (a run's next-level task, group part or control call)
 *
 * The chip says what it does on standard error just before (one line, "plexus: test fault:",
 * with the wall clock as t=<seconds since the epoch>, so a test can time what follows). The
 * text is checked when the configuration is read (px_config_default): a malformed one is
 * refused naming the part that is wrong. Unset, it costs one predictable branch per point.
 */
#ifndef PX_UTIL_FAULT_H
#define PX_UTIL_FAULT_H

#include <plexus/status.h>

#include <stdint.h>

#include "util.h"

typedef enum {
    PX_FAULT_AT_COLL, /* a collective entered */
    PX_FAULT_AT_CALL, /* a call of the worker started */
    PX_FAULT_AT_COUNT
} px_fault_point;

typedef struct px_fault_spec {
    int host, chip;
    int signo;     /* SIGKILL or SIGSTOP */
    int to_parent; /* 1: the worker (parent process), 0: the chip itself */
    px_fault_point point;
    uint64_t n;
} px_fault_spec;

/* Parses text (the knob's grammar above) into *f. PX_EINVAL naming the part that is wrong. */
px_status px_fault_parse(const char *text, px_fault_spec *f);

/* In a chip process at start-up: arms the fault of PLEXUS_TEST_FAULT when it names this host
 * and chip (nothing when unset or another's). */
void px_fault_arm(int host, int chip);

/* Nonzero in the one chip process whose fault is armed and not yet done. */
extern int px_fault_armed;

void px_fault_hit(px_fault_point point);

/* A point of the work: counts it and lands the fault at its N-th occurrence. */
static inline void px_fault_at(px_fault_point point)
{
    if (PX_UNLIKELY(px_fault_armed))
        px_fault_hit(point);
}

#endif
