/*
 * comm_mpi_anchor_smoke.c - the ctest bench.comm_mpi_anchor.smoke: runs the Open MPI anchor
 * of bench_comm in smoke mode through bench_mpi_anchor() exactly as bench_comm will, and
 * checks that
 *   - 2 ranks give the three expected rows (allreduce 8 B and 4 KiB, put_signal), each
 *     verified, with positive times and busbw = algbw * 2(n-1)/n;
 *   - 3 ranks (an odd count) verify the allreduce too;
 *   - a corrupted allreduce element, a wrong put_signal payload, a dropped signal (the wait
 *     must end at its deadline) and a hung job (the launcher must kill it by its timeout)
 *     each make bench_mpi_anchor() return -1, in bounded time;
 *   - a stuck mpirun (this program posing as one: it ignores SIGTERM and has a child in a
 *     process group of its own) is ended with its child by the launcher's session kill;
 *   - with SIGCHLD ignored (mpirun reaped by the kernel) the launcher fails with a message;
 *   - no scratch directory is left in /dev/shm and no rank outlives a run.
 * It fails if the anchor's verification, its wait deadline or the launcher's timeout is
 * broken. Exits 77 (skipped) with the reason when mpirun or the anchor is not installed.
 *
 * `comm_mpi_anchor_smoke --run full|quick RANKS` instead runs the sweep once through
 * bench_mpi_anchor() and prints every row with the memcpy floor of its size (how the
 * numbers of docs/lab/benchmarks-log.md, "Measured here", were taken before bench_comm
 * existed).
 */
#define _GNU_SOURCE
#include "mpi_anchor.h"

#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define SMOKE_MAX_ROWS BENCH_MPI_MAX_ROWS

static int smoke_failures;

static void smoke_fail(const char *what)
{
    fprintf(stderr, "comm_mpi_anchor_smoke: FAIL: %s\n", what);
    smoke_failures++;
}

/* Counts the launcher's scratch directories left in dir. */
static int smoke_scratch_in(const char *dir)
{
    DIR *d = opendir(dir);
    struct dirent *e;
    int n = 0;

    if (d == NULL)
        return 0;
    while ((e = readdir(d)) != NULL)
        n += strncmp(e->d_name, "plexus-mpi-anchor.", 18) == 0;
    closedir(d);
    return n;
}

/* Counts the launcher's scratch directories left in /dev/shm and /tmp. */
static int smoke_scratch_left(void)
{
    return smoke_scratch_in("/dev/shm") + smoke_scratch_in("/tmp");
}

/* Counts live processes whose program is this build's comm_mpi_anchor (ranks that outlived
 * their job). */
static int smoke_ranks_alive(void)
{
    char anchor[4096], exe[4096];
    ssize_t len = readlink("/proc/self/exe", anchor, sizeof(anchor) - 32);
    char *slash;
    DIR *d;
    struct dirent *e;
    int n = 0;

    if (len <= 0)
        return 0;
    anchor[len] = '\0';
    slash = strrchr(anchor, '/');
    strcpy(slash != NULL ? slash + 1 : anchor, "comm_mpi_anchor");
    d = opendir("/proc");
    if (d == NULL)
        return 0;
    while ((e = readdir(d)) != NULL) {
        char path[300];

        if (e->d_name[0] < '0' || e->d_name[0] > '9')
            continue;
        snprintf(path, sizeof(path), "/proc/%s/exe", e->d_name);
        len = readlink(path, exe, sizeof(exe) - 1);
        if (len <= 0)
            continue;
        exe[len] = '\0';
        n += strcmp(exe, anchor) == 0;
    }
    closedir(d);
    return n;
}

/* Checks one allreduce row. */
static void smoke_check_allreduce(const bench_mpi_row *r, int ranks, uint64_t bytes)
{
    double want_bus = r->algbw_gbs * 2.0 * (ranks - 1) / ranks;
    double want_alg = (double)bytes / (r->us * 1e3);

    if (r->op != BENCH_MPI_ALLREDUCE || r->ranks != ranks || r->bytes != bytes)
        smoke_fail("an allreduce row has the wrong op, rank count or size");
    if (!(r->us > 0.0) || r->reps != 1 || r->iters != 1 || r->verified != 1)
        smoke_fail("an allreduce row is not timed, not 1 rep x 1 iter, or not verified");
    if (fabs(r->algbw_gbs - want_alg) > 0.01 * want_alg + 1e-4 ||
        fabs(r->busbw_gbs - want_bus) > 0.01 * want_bus + 1e-4)
        smoke_fail("an allreduce row's algbw is not bytes/us or busbw not algbw*2(n-1)/n");
}

/* 2 ranks, both ops: three verified rows in order. */
static void smoke_two_ranks(void)
{
    bench_mpi_row rows[SMOKE_MAX_ROWS];
    char cfg[2048];
    int n = bench_mpi_anchor(2, BENCH_SMOKE, BENCH_MPI_ALL, rows, SMOKE_MAX_ROWS, cfg, sizeof(cfg));

    printf("BENCH comm_mpi_anchor_smoke config %s\n", cfg);
    for (int i = 0; i < n; i++)
        printf("BENCH comm_mpi_anchor_smoke op=%s ranks=%d bytes=%llu us=%.3f busbw_gbs=%.4f\n",
               rows[i].op == BENCH_MPI_ALLREDUCE ? "allreduce" : "put_signal", rows[i].ranks,
               (unsigned long long)rows[i].bytes, rows[i].us, rows[i].busbw_gbs);
    if (n != 3) {
        smoke_fail("2 ranks: expected 3 rows (allreduce 8 B, 4 KiB, put_signal)");
        return;
    }
    if (strstr(cfg, "--mca btl self,vader") == NULL || strstr(cfg, "-np 2") == NULL ||
        strstr(cfg, "library=\"Open MPI") == NULL)
        smoke_fail("2 ranks: the printed configuration lacks the pinned btl, -np or library");
    smoke_check_allreduce(&rows[0], 2, 8);
    smoke_check_allreduce(&rows[1], 2, 4096);
    if (rows[2].op != BENCH_MPI_PUT_SIGNAL || rows[2].ranks != 2 || rows[2].bytes != 8 ||
        !(rows[2].us > 0.0) || rows[2].iters != 100 || rows[2].verified != 1)
        smoke_fail("2 ranks: the put_signal row is wrong (op, ranks 2, 8 B, 100 round trips, "
                   "verified)");
}

/* 3 ranks, allreduce only: the odd rank count verifies too. */
static void smoke_three_ranks(void)
{
    bench_mpi_row rows[SMOKE_MAX_ROWS];
    int n = bench_mpi_anchor(3, BENCH_SMOKE, BENCH_MPI_ALLREDUCE, rows, SMOKE_MAX_ROWS, NULL, 0);

    if (n != 2) {
        smoke_fail("3 ranks: expected 2 allreduce rows");
        return;
    }
    smoke_check_allreduce(&rows[0], 3, 8);
    smoke_check_allreduce(&rows[1], 3, 4096);
}

/* A job with a fault must fail (-1) within limit_s seconds. */
static void smoke_fault(const char *fault, unsigned ops, double limit_s, const char *what)
{
    bench_mpi_row rows[SMOKE_MAX_ROWS];
    uint64_t t0 = bench_now_ns();
    int n;
    double took;

    setenv("PLEXUS_MPI_ANCHOR_FAULT", fault, 1);
    fprintf(stderr, "comm_mpi_anchor_smoke: fault %s: expecting a failure below\n", fault);
    n = bench_mpi_anchor(2, BENCH_SMOKE, ops, rows, SMOKE_MAX_ROWS, NULL, 0);
    unsetenv("PLEXUS_MPI_ANCHOR_FAULT");
    took = (double)(bench_now_ns() - t0) * 1e-9;
    printf("BENCH comm_mpi_anchor_smoke fault=%s result=%d seconds=%.1f\n", fault, n, took);
    if (n != -1)
        smoke_fail(what);
    if (took > limit_s)
        smoke_fail("a failing job was not ended by its deadline");
}

/* --run MODE RANKS: one sweep, printed with the memcpy floor; returns the exit status. */
static int smoke_run(const char *mode_name, const char *ranks_text)
{
    bench_mpi_row rows[BENCH_MPI_MAX_ROWS];
    char cfg[2048];
    bench_mode mode = strcmp(mode_name, "full") == 0 ? BENCH_FULL : BENCH_QUICK;
    int ranks = atoi(ranks_text);
    int n;

    if ((mode == BENCH_QUICK && strcmp(mode_name, "quick") != 0) || ranks < 2 || ranks > 64) {
        fprintf(stderr, "usage: comm_mpi_anchor_smoke [--run full|quick RANKS(2..64)]\n");
        return 2;
    }
    n = bench_mpi_anchor(ranks, mode, BENCH_MPI_ALL, rows, BENCH_MPI_MAX_ROWS, cfg, sizeof(cfg));
    printf("BENCH comm_mpi_anchor config %s\n", cfg);
    for (int i = 0; i < n; i++) {
        if (rows[i].op == BENCH_MPI_PUT_SIGNAL) {
            printf("BENCH comm_mpi_anchor op=put_signal half_rtt_us=%.3f iters=%d reps=%d\n",
                   rows[i].us, rows[i].iters, rows[i].reps);
        } else {
            double floor = bench_memcpy_floor(rows[i].bytes);

            printf("BENCH comm_mpi_anchor op=allreduce ranks=%d bytes=%llu us=%.3f "
                   "busbw_gbs=%.4f memcpy_gbs=%.3f busbw_over_memcpy=%.4f iters=%d reps=%d\n",
                   rows[i].ranks, (unsigned long long)rows[i].bytes, rows[i].us, rows[i].busbw_gbs,
                   floor, rows[i].busbw_gbs / floor, rows[i].iters, rows[i].reps);
        }
    }
    return n > 0 ? 0 : 1;
}

/*
 * A stuck mpirun, for the launcher's last resort: run by bench_mpi_anchor as PLEXUS_MPIRUN
 * (this program again, recognised by the pinned first argument). It and a child in a
 * process group of its own ignore SIGTERM and sleep; the child's pid goes into
 * PLEXUS_SMOKE_PIDFILE. Only the launcher's SIGKILL of the whole session ends them.
 */
static int smoke_stuck_mpirun(void)
{
    const char *pidfile = getenv("PLEXUS_SMOKE_PIDFILE");
    pid_t child;
    FILE *f;

    signal(SIGTERM, SIG_IGN);
    child = fork();
    if (child == 0) {
        setpgid(0, 0);
        sleep(600);
        _exit(0);
    }
    f = pidfile != NULL ? fopen(pidfile, "w") : NULL;
    if (f != NULL) {
        fprintf(f, "%d\n", (int)child);
        fclose(f);
    }
    sleep(600);
    return 0;
}

/* Whether pid is gone (or a zombie waiting for init). */
static int smoke_pid_gone(pid_t pid)
{
    char path[64], stat[256] = "";
    const char *rp;
    FILE *f;

    snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
    f = fopen(path, "r");
    if (f == NULL)
        return 1;
    if (fgets(stat, sizeof(stat), f) == NULL)
        stat[0] = '\0';
    fclose(f);
    rp = strrchr(stat, ')');
    return rp != NULL && (rp[2] == 'Z' || rp[2] == 'X');
}

/* A stuck mpirun whose child sits in its own process group: the launcher must end both. */
static void smoke_stuck(double slack)
{
    char self[4096], pidfile[64] = "/tmp/plexus-smoke-pid.XXXXXX";
    bench_mpi_row rows[SMOKE_MAX_ROWS];
    ssize_t len = readlink("/proc/self/exe", self, sizeof(self) - 1);
    int fd = mkstemp(pidfile), pid = 0, n;
    uint64_t t0 = bench_now_ns();
    FILE *f;

    if (len <= 0 || fd < 0) {
        smoke_fail("stuck mpirun: cannot find this program or make a pid file");
        return;
    }
    close(fd);
    self[len] = '\0';
    setenv("PLEXUS_MPIRUN", self, 1);
    setenv("PLEXUS_SMOKE_PIDFILE", pidfile, 1);
    setenv("PLEXUS_MPI_ANCHOR_TIMEOUT_S", "2", 1);
    fprintf(stderr, "comm_mpi_anchor_smoke: a stuck mpirun: expecting a failure below\n");
    n = bench_mpi_anchor(2, BENCH_SMOKE, BENCH_MPI_ALLREDUCE, rows, SMOKE_MAX_ROWS, NULL, 0);
    unsetenv("PLEXUS_MPIRUN");
    unsetenv("PLEXUS_SMOKE_PIDFILE");
    unsetenv("PLEXUS_MPI_ANCHOR_TIMEOUT_S");
    printf("BENCH comm_mpi_anchor_smoke fault=stuck_mpirun result=%d seconds=%.1f\n", n,
           (double)(bench_now_ns() - t0) * 1e-9);
    f = fopen(pidfile, "r");
    if (f == NULL || fscanf(f, "%d", &pid) != 1 || pid <= 0)
        smoke_fail("stuck mpirun: it did not write its child's pid");
    if (f != NULL)
        fclose(f);
    unlink(pidfile);
    if (n != -1)
        smoke_fail("stuck mpirun: bench_mpi_anchor did not fail");
    if ((double)(bench_now_ns() - t0) * 1e-9 > 2 + 3 + 5 * slack)
        smoke_fail("stuck mpirun: not ended by the timeout and the grace period");
    for (int i = 0; pid > 0 && i < 50 && !smoke_pid_gone(pid); i++)
        usleep(20 * 1000);
    if (pid > 0 && !smoke_pid_gone(pid)) {
        smoke_fail("stuck mpirun: its child in another process group survived the kill");
        kill(pid, SIGKILL);
    }
}

/* With SIGCHLD ignored mpirun is reaped by the kernel: the launcher must say so and fail,
 * not report a timeout or signal a pid that may have been reused. */
static void smoke_sigchld_ignored(void)
{
    bench_mpi_row rows[SMOKE_MAX_ROWS];
    void (*old)(int) = signal(SIGCHLD, SIG_IGN);
    int n;

    fprintf(stderr, "comm_mpi_anchor_smoke: SIGCHLD ignored: expecting a failure below\n");
    n = bench_mpi_anchor(2, BENCH_SMOKE, BENCH_MPI_ALLREDUCE, rows, SMOKE_MAX_ROWS, NULL, 0);
    signal(SIGCHLD, old);
    printf("BENCH comm_mpi_anchor_smoke fault=sigchld_ignored result=%d\n", n);
    if (n != -1)
        smoke_fail("SIGCHLD ignored: bench_mpi_anchor did not fail");
}

int main(int argc, char **argv)
{
    char why[4200];
    const char *slack_env = getenv("PLEXUS_TEST_SLACK");
    double slack = slack_env != NULL && atof(slack_env) >= 1.0 ? atof(slack_env) : 1.0;

    if (argc > 1 && strcmp(argv[1], "--allow-run-as-root") == 0)
        return smoke_stuck_mpirun();
#ifdef PX_MPI_ANCHOR_ABSENT
    if (getenv("PLEXUS_MPI_ANCHOR") == NULL) {
        printf("comm_mpi_anchor_smoke: skipped: the anchor is %s (libmpi is not instrumented "
               "for the sanitizers); PLEXUS_MPI_ANCHOR=<path> runs this build's launcher "
               "against a normal build's anchor\n",
               PX_MPI_ANCHOR_ABSENT);
        return 77;
    }
#endif
    if (!bench_mpi_available(why, sizeof(why))) {
        printf("comm_mpi_anchor_smoke: skipped: %s\n", why);
        return 77;
    }
    if (argc == 4 && strcmp(argv[1], "--run") == 0)
        return smoke_run(argv[2], argv[3]);
    if (argc != 1) {
        fprintf(stderr, "usage: comm_mpi_anchor_smoke [--run full|quick RANKS]\n");
        return 2;
    }
    smoke_two_ranks();
    smoke_three_ranks();
    smoke_fault("allreduce", BENCH_MPI_ALLREDUCE, 60 * slack,
                "a corrupted allreduce element was not caught");
    smoke_fault("put_signal", BENCH_MPI_PUT_SIGNAL, 60 * slack,
                "a wrong put_signal payload was not caught");
    setenv("PLEXUS_MPI_ANCHOR_WAIT_S", "1", 1);
    smoke_fault("drop_signal", BENCH_MPI_PUT_SIGNAL, 30 * slack,
                "a dropped signal did not end the wait at its deadline");
    unsetenv("PLEXUS_MPI_ANCHOR_WAIT_S");
    setenv("PLEXUS_MPI_ANCHOR_TIMEOUT_S", "4", 1);
    smoke_fault("hang", BENCH_MPI_ALLREDUCE, 4 + 3 + 5 * slack,
                "a hung job was not killed at the launcher's timeout");
    unsetenv("PLEXUS_MPI_ANCHOR_TIMEOUT_S");
    smoke_stuck(slack);
    smoke_sigchld_ignored();
    usleep(200 * 1000); /* ranks killed by SIGKILL are reaped by init */
    if (smoke_scratch_left() != 0)
        smoke_fail("a plexus-mpi-anchor.* scratch directory was left in /dev/shm or /tmp");
    if (smoke_ranks_alive() != 0)
        smoke_fail("a comm_mpi_anchor rank outlived its job");
    printf(smoke_failures == 0 ? "PASS\n" : "FAIL: %d failures\n", smoke_failures);
    return smoke_failures == 0 ? 0 : 1;
}
