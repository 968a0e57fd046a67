/*
 * dfx_chain.h - the `chain` graph of bench_tasks, for bench_dfx: N empty tasks, task i
 * INOUT on T[i mod 8] (8 chains, N - 8 edges), one core thread. Kernels check a sequence
 * number in their tensor, so a missing edge is counted; every run is verified. One core,
 * with bench_dfx's PLEXUS_BIND=cores, puts the core and the orchestration on a CPU each of a
 * 2-CPU machine in every run: with 2 cores on 2 CPUs the chain ran at 0.09 or at 0.18 us per
 * task from one run to the next (which core took the tasks, the one sharing the
 * orchestration's CPU or the other), so comparing two runs compared modes, not DFX.
 *
 * The same source is built twice: into bench_dfx (the library with DFX compiled in) and into
 * bench_dfx_off (the library built with PX_DFX=0), whose main() is dfx_chain_main().
 * bench_dfx runs both as child processes (`--chain N --reps R`), interleaved, to measure
 * what DFX costs when it is compiled in but off.
 */
#ifndef PX_BENCH_DFX_CHAIN_H
#define PX_BENCH_DFX_CHAIN_H

#include <stddef.h>
#include <stdint.h>

#include <plexus/plexus.h>

#define DFX_CHAIN_CORES 1
#define DFX_CHAIN_CHAINS 8

typedef struct dfx_chain {
    px_worker *w;
    px_kernel_id k;
    px_kernel_id gate;    /* dfx_chain_run_serial's first task: holds the core */
    uint32_t ring;        /* the worker's task ring slots */
    uint64_t orch_cpu_ns; /* the orchestration thread's CPU time over the last run's submits */
    uint64_t submit_ns;   /* dfx_chain_run_serial: wall time of the submits, core held */
    uint64_t exec_ns;     /* ... and of the tasks' execution, from the gate's opening */
} dfx_chain;

/* The calling thread's CPU time in ns (CLOCK_THREAD_CPUTIME_ID). */
uint64_t dfx_chain_thread_ns(void);

/* Creates a worker from cfg (cores forced to DFX_CHAIN_CORES) with the chain kernel. 0, or -1
 * with why. */
int dfx_chain_open(dfx_chain *c, const px_config *cfg, char *why, size_t n);

/*
 * Runs the chain of ntasks once and verifies it (sequence numbers, executions, the run's
 * task and edge counts). Returns microseconds per task (px_run entry to return), or -1 with
 * the reason in why.
 */
double dfx_chain_run(dfx_chain *c, uint64_t ntasks, char *why, size_t n);

/*
 * The chain of ntasks with its two sides apart, so that neither waits for the other: a gate
 * task holds the one core (sleeping in 20 us steps) while the orchestration submits the whole
 * chain, then the core runs it back to back. c->submit_ns gets the wall time of the submits,
 * c->exec_ns the time from the core's leaving the gate to the end of the last task's kernel.
 * ntasks must leave the gate room in the task ring (ntasks < ring). Verified as
 * dfx_chain_run. Returns 0, or -1 with the reason in why.
 */
int dfx_chain_run_serial(dfx_chain *c, uint64_t ntasks, char *why, size_t n);

/* Destroys the worker. */
void dfx_chain_close(dfx_chain *c);

/*
 * `PROG --chain N --reps R`: runs the chain R times with the environment's configuration
 * (DFX off unless PLEXUS_DFX says otherwise) and prints `CHAIN us_per_task=<v>` per rep.
 * Returns the exit status.
 */
int dfx_chain_main(int argc, char **argv);

#endif
