/*
 * mpi_anchor.h - the Open MPI anchor of bench_comm, seen from a benchmark: runs
 * build/bin/comm_mpi_anchor under mpirun with a pinned configuration, with a wall-clock
 * timeout, and returns its verified results as rows; plus the single-thread memcpy floor.
 *
 * Nothing here includes or links MPI: the anchor is a separate program (the only one that
 * links libmpi), so libplexus and the benchmarks never need it. See docs/benchmarks.md,
 * "bench_comm: the Open MPI anchor".
 */
#ifndef PX_BENCH_MPI_ANCHOR_H
#define PX_BENCH_MPI_ANCHOR_H

#include "benchutil.h"

#include <stddef.h>
#include <stdint.h>

/*
 * Rows a bench_mpi_anchor() call can return at most: full mode has 24 allreduce sizes
 * (8 B .. 64 MiB doubling) and one put_signal row; quick 6 + 1; smoke 2 + 1.
 */
#define BENCH_MPI_MAX_ROWS 32

/* The anchor's operations, as a bit mask for bench_mpi_anchor(). */
typedef enum bench_mpi_op {
    BENCH_MPI_ALLREDUCE = 1u << 0,  /* MPI_Allreduce(MPI_IN_PLACE, float, MPI_SUM) sweep */
    BENCH_MPI_PUT_SIGNAL = 1u << 1, /* MPI_Put + MPI_Win_flush flag ping-pong, ranks 0 and 1 */
    BENCH_MPI_ALL = BENCH_MPI_ALLREDUCE | BENCH_MPI_PUT_SIGNAL
} bench_mpi_op;

/* One result of the anchor (one ANCHOR line). */
typedef struct bench_mpi_row {
    bench_mpi_op op;  /* BENCH_MPI_ALLREDUCE or BENCH_MPI_PUT_SIGNAL */
    int ranks;        /* ranks that took part (put_signal: always 2) */
    uint64_t bytes;   /* allreduce message size; put_signal: the 8-byte payload */
    double us;        /* allreduce: median time of one allreduce (slowest rank), us;
                         put_signal: median half round trip, us */
    double algbw_gbs; /* allreduce: bytes / us, GB/s (1e9 bytes); put_signal: 0 */
    double busbw_gbs; /* allreduce: algbw * 2 (ranks - 1) / ranks; put_signal: 0 */
    int iters;        /* operations (allreduce) or round trips (put_signal) per repetition */
    int reps;         /* repetitions the median is over */
    int verified;     /* 1: every checked result was exact on every rank (always 1 in a
                         returned row: a row with 0 makes bench_mpi_anchor fail) */
} bench_mpi_row;

/*
 * Returns 1 when the anchor can run: mpirun is on PATH (or PLEXUS_MPIRUN names it) and the
 * comm_mpi_anchor program exists next to the running program (or PLEXUS_MPI_ANCHOR names
 * it). Else returns 0 and writes why into why[0..whyn-1] (why may be NULL).
 */
int bench_mpi_available(char *why, size_t whyn);

/*
 * Runs `mpirun -np ranks <pinned options> comm_mpi_anchor <mode> <ops>` and parses its
 * lines into rows[0..max_rows-1]. The exact command line and the MPI library version are
 * written into cfg[0..cfgn-1] (cfg may be NULL; 2048 bytes hold it whole, longer text is cut):
 * the caller prints it with its config line.
 * The job is killed when it runs past its deadline (smoke 60 s, quick 180 s, full 900 s;
 * PLEXUS_MPI_ANCHOR_TIMEOUT_S overrides). Returns the number of rows, or -1 with the reason
 * on stderr: the anchor is unavailable, the job failed, timed out or did not verify, a line
 * did not parse, or more than max_rows rows came back.
 */
int bench_mpi_anchor(int ranks, bench_mode mode, unsigned ops, bench_mpi_row *rows, int max_rows,
                     char *cfg, size_t cfgn);

/* How the anchor's ranks run: as installed, or with glibc's malloc tuned (BENCH_MPI_MALLOC:
 * MALLOC_MMAP_THRESHOLD_=1 GiB, MALLOC_TRIM_THRESHOLD_=4 GiB, MALLOC_TOP_PAD_=256 MiB given
 * to every rank with mpirun -x), which keeps Open MPI's large temporaries off fresh mappings. */
enum { BENCH_MPI_DEFAULT = 0, BENCH_MPI_MALLOC = 1 };

/* bench_mpi_anchor with the ranks' environment of `variant` (the command line in cfg shows
 * its -x options). bench_mpi_anchor() is the BENCH_MPI_DEFAULT variant. */
int bench_mpi_anchor_variant(int ranks, bench_mode mode, unsigned ops, int variant,
                             bench_mpi_row *rows, int max_rows, char *cfg, size_t cfgn);

/*
 * Several hosts on this machine (issue 21): a job started by the namespace harness
 * (tests/system/netns/mpi_hosts.sh: `hosts` network namespaces, `per_host` MPI ranks each,
 * ranks i*per_host .. of host i; MPI over TCP on the test links), with the hosts' pinned
 * options (docs/benchmarks.md, "bench_comm --hosts").
 */
typedef struct bench_mpi_hosts {
    const char *harness; /* path of mpi_hosts.sh */
    int hosts;           /* 2..4 */
    int per_host;        /* MPI ranks per host, 1..8 */
} bench_mpi_hosts;

/*
 * The anchor across h's hosts: as bench_mpi_anchor_variant, on hosts x per_host ranks, the
 * put_signal between rank 0 and the first rank of host 1 (rank per_host) through an ordinary
 * RMA window. Returns the rows, -1 with the reason on stderr, or -2 when the harness cannot
 * run here (not root, no `ip netns`, ...): its reason in skip[0..skipn-1].
 */
int bench_mpi_anchor_hosts(const bench_mpi_hosts *h, bench_mode mode, unsigned ops, int variant,
                           bench_mpi_row *rows, int max_rows, char *cfg, size_t cfgn,
                           char *skip, size_t skipn);

/*
 * Runs argv (a program of the caller's and its arguments, NULL-terminated) as the ranks of a
 * job across h's hosts, with the same pinned options, deadline and clean-up as the anchor's,
 * and parses the ANCHOR lines it prints (the anchor's line protocol: see comm_mpi_anchor.c)
 * into rows. Returns as bench_mpi_anchor_hosts.
 */
int bench_mpi_hosts_run(const bench_mpi_hosts *h, bench_mode mode, const char *const *argv,
                        bench_mpi_row *rows, int max_rows, char *cfg, size_t cfgn, char *skip,
                        size_t skipn);

/*
 * Returns the single-thread memcpy bandwidth for bytes-sized copies in GB/s (1e9 bytes per
 * second): buffers allocated and touched beforehand, enough copies per repetition to run at
 * least 10 ms, the median of 5 repetitions. Returns -1 with the reason on stderr when bytes
 * is 0 or the buffers cannot be allocated.
 */
double bench_memcpy_floor(size_t bytes);

#endif
