/*
 * test_domain_life.c - the lifetime and resources of communication domains on a level-3
 * worker (issue 20, items 3-7 and 11): a one-member domain allocated and released 200 times
 * leaves the chip's descriptors and memory objects as they were; 1000 domains allocated, used
 * and released in one run all succeed (a released domain frees its chip slot once its tasks
 * have finished) and every allreduce gives the sum worked out here; a member killed during
 * px_domain_alloc leaves no descriptor in the survivors; a handle used after
 * px_worker_destroy is refused without reading freed memory (ASan); a chip stopped before a
 * run of allreduces is killed once the collective has named it, and the run ends within the
 * comm deadline plus a little; so is a chip stopped before a user's domain kernel that waits
 * for it (barrier or signal), and one stopped before a copy task or px_domain_alloc ends the
 * run within PLEXUS_TIMEOUT_S plus a little (one deadline, then it is killed and nothing waits
 * for it again); windows the host cannot back are refused at allocation; each
 * chip's device arena is a memfd of mode 0600 named after the chip and its pid.
 * Multi-process: ctest runs it under RESOURCE_LOCK "chips" (tests/system/domain_life.cmake).
 */
#include "testutil.h"

#include <dirent.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "hier/hier_internal.h"

/* ---- helpers ---- */

static px_worker *tl_worker(int chips)
{
    px_config c;
    px_worker *w = NULL;

    px_test_config(&c, 1);
    c.level = 3;
    c.chips = chips;
    c.device_mem = 64ull << 20;
    c.heap_ring = 16ull << 20;
    c.timeout_s = 30.0 * px_test_slack();
    PX_ASSERT_OK(px_worker_create(&c, &w));
    PX_ASSERT_OK(px_worker_init(w));
    return w;
}

static pid_t tl_chip_pid(px_worker *w, int chip)
{
    return px_hier_of(w)->procs[chip].pid;
}

/* 1 when every thread of process pid is stopped (state T in /proc/pid/task/TID/stat). */
static int tl_all_threads_stopped(pid_t pid)
{
    char dir[64], path[384], stat[256], *rp;
    DIR *dp;
    struct dirent *e;
    FILE *f;
    int n = 0, stopped = 0;

    snprintf(dir, sizeof(dir), "/proc/%d/task", (int)pid);
    if ((dp = opendir(dir)) == NULL)
        return 0;
    while ((e = readdir(dp)) != NULL) {
        if (e->d_name[0] == '.')
            continue;
        snprintf(path, sizeof(path), "%s/%s/stat", dir, e->d_name);
        n++;
        if ((f = fopen(path, "r")) == NULL)
            continue;
        if (fgets(stat, sizeof(stat), f) != NULL && (rp = strrchr(stat, ')')) != NULL &&
            rp[1] == ' ' && rp[2] == 'T')
            stopped++;
        fclose(f);
    }
    closedir(dp);
    return n > 0 && stopped == n;
}

/*
 * Stops chip process pid (SIGSTOP) and returns only once it is stopped, every thread of it.
 * kill() returns when the signal is queued: the kernel wakes one thread of the chip for it
 * (its main thread), which starts the group stop only when it next runs, and until then the
 * chip's other threads go on. Under load its service thread answered a whole px_domain_alloc
 * (comm.create, hier.fd_out, comm.map, comm.ready) after kill() had returned, so the
 * allocation rightly succeeded and the test failed for no defect of plexus. waitid(WSTOPPED)
 * reports the stop once the group stop is complete (this process is the chips' parent; the
 * runtime waits for WEXITED only, so nothing else takes the report); polled with WNOHANG
 * under a bound, so a chip that died instead fails the test rather than hanging it.
 */
static void tl_stop_chip(pid_t pid)
{
    uint64_t t0 = px_test_now_ns();
    siginfo_t si;

    assert_int_equal(kill(pid, SIGSTOP), 0);
    for (;;) {
        memset(&si, 0, sizeof(si));
        assert_int_equal(waitid(P_PID, (id_t)pid, &si, WSTOPPED | WNOHANG), 0);
        if (si.si_pid == pid)
            break;
        assert_true((double)(px_test_now_ns() - t0) / 1e9 < 10.0 * px_test_slack());
        usleep(1000);
    }
    assert_int_equal(si.si_code, CLD_STOPPED);
    assert_true(tl_all_threads_stopped(pid)); /* not one thread left to answer a call */
}

/* Descriptors open in process pid, and the bytes of those that are memory objects (memfds). */
static int tl_proc_fds(pid_t pid, long long *memfd_bytes)
{
    char dir[64], path[384], link[256];
    DIR *dp;
    struct dirent *e;
    int n = 0;

    snprintf(dir, sizeof(dir), "/proc/%d/fd", (int)pid);
    *memfd_bytes = 0;
    if ((dp = opendir(dir)) == NULL)
        return -1;
    while ((e = readdir(dp)) != NULL) {
        struct stat sb;
        ssize_t len;

        if (e->d_name[0] == '.')
            continue;
        snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
        len = readlink(path, link, sizeof(link) - 1);
        if (len < 0)
            continue;
        link[len] = '\0';
        n++;
        if (strncmp(link, "/memfd:", 7) == 0 && stat(path, &sb) == 0)
            *memfd_bytes += (long long)sb.st_size;
    }
    closedir(dp);
    return n;
}

/* ---- item 3: a one-member domain, allocated and released 200 times ---- */

static px_status tl_solo_orch(px_orch *o, const px_task_args *args, void *user)
{
    static const int chips[1] = {1};
    px_domain_buffer b = {"x", 1 << 20};
    px_domain_spec s = {PX_DOMAIN_SPEC_HEADER,
                        .name = "solo", .chips = chips, .nchips = 1, .window_bytes = 1 << 20,
                        .buffers = &b, .nbuffers = 1};
    px_domain *d;
    px_status st = px_domain_alloc(o, &s, &d);

    return st == PX_OK ? px_domain_release(d) : st;
}

/* A one-member domain (1 MiB window on chip 1) allocated and released in 200 runs: every
 * allocation succeeds, and chip 1's descriptors and memfd bytes after the last run are those
 * after the first (the window's descriptor offered for an exchange that one member never has
 * stayed in its table: 64 runs filled it, and each kept 1 MiB alive). */
static void test_one_member_domain_leaks_nothing(void **state)
{
    px_worker *w = tl_worker(2);
    long long bytes0, bytes1;
    int fds0, fds1;

    PX_ASSERT_OK(px_run(w, tl_solo_orch, NULL, NULL));
    fds0 = tl_proc_fds(tl_chip_pid(w, 1), &bytes0);
    assert_true(fds0 > 0);
    for (int i = 1; i < 200; i++) {
        px_status st = px_run(w, tl_solo_orch, NULL, NULL);

        if (st != PX_OK)
            print_error("run %d: %s\n", i, px_last_error());
        assert_int_equal(st, PX_OK);
    }
    fds1 = tl_proc_fds(tl_chip_pid(w, 1), &bytes1);
    assert_int_equal(fds1, fds0);
    assert_int_equal(bytes1, bytes0);
    PX_ASSERT_OK(px_worker_destroy(w));
}

/* ---- item 5: 1000 domains allocated, used and released in one run ---- */

#define TL_MANY 1000
#define TL_EL 16

/* Orchestration: in [2][TL_EL] (IN), out [TL_MANY][TL_EL] (OUT). Domain i: write rank r from
 * in row r, allreduce (sum), read rank i % 2 into out row i, release. */
static px_status tl_many_orch(px_orch *o, const px_task_args *args, void *user)
{
    static const int chips[2] = {0, 1};
    const px_tensor *in = px_arg_tensor(args, 0), *out = px_arg_tensor(args, 1);
    const int64_t row[1] = {TL_EL};
    px_domain_buffer b = {"x", TL_EL * sizeof(float)};
    px_domain_spec s = {PX_DOMAIN_SPEC_HEADER,
                        .chips = chips, .nchips = 2, .window_bytes = TL_EL * sizeof(float),
                        .buffers = &b, .nbuffers = 1};
    int *done = user;
    px_status st = PX_OK;

    for (int i = 0; st == PX_OK && i < TL_MANY; i++) {
        char name[32];
        px_domain *d;
        px_tensor v;

        snprintf(name, sizeof(name), "many%d", i);
        s.name = name;
        if ((st = px_domain_alloc(o, &s, &d)) != PX_OK)
            break;
        for (int r = 0; st == PX_OK && r < 2; r++)
            if ((st = px_tensor_view(in, 1, row, NULL, (int64_t)r * TL_EL, &v)) == PX_OK)
                st = px_submit_domain_write(o, d, r, "x", 0, &v, NULL);
        if (st == PX_OK)
            st = px_submit_allreduce(o, d, "x", TL_EL, PX_F32, PX_OP_SUM, NULL);
        if (st == PX_OK && (st = px_tensor_view(out, 1, row, NULL, (int64_t)i * TL_EL,
                                                &v)) == PX_OK)
            st = px_submit_domain_read(o, d, i % 2, "x", 0, &v, NULL);
        if (st == PX_OK)
            st = px_domain_release(d);
        if (st == PX_OK)
            *done = i + 1;
    }
    return st;
}

/* 1000 alloc + use + release pairs in one run all succeed (a released domain used to keep its
 * chip slot until the run ended: the 33rd failed), every allreduce gives in0 + in1, and the
 * chips' descriptors afterwards are those before. */
static void test_thousand_domains_in_one_run(void **state)
{
    px_worker *w = tl_worker(2);
    float in[2 * TL_EL], *out = calloc((size_t)TL_MANY * TL_EL, sizeof(float));
    const int64_t sin[2] = {2, TL_EL}, sout[2] = {TL_MANY, TL_EL};
    px_tensor tin, tout;
    px_task_args args;
    long long b0[2], b1[2];
    int fds0[2], done = 0;
    px_status st;

    assert_non_null(out);
    for (int i = 0; i < TL_EL; i++) {
        in[i] = (float)(i + 1);
        in[TL_EL + i] = (float)(100 * i);
    }
    PX_ASSERT_OK(px_tensor_make(&tin, in, PX_F32, 2, sin));
    PX_ASSERT_OK(px_tensor_make(&tout, out, PX_F32, 2, sout));
    for (int c = 0; c < 2; c++)
        fds0[c] = tl_proc_fds(tl_chip_pid(w, c), &b0[c]);
    px_args_init(&args);
    px_args_in(&args, &tin);
    px_args_out(&args, &tout);
    st = px_run(w, tl_many_orch, &args, &done);
    if (st != PX_OK)
        print_error("after %d domains: %s\n", done, px_last_error());
    assert_int_equal(st, PX_OK);
    assert_int_equal(done, TL_MANY);
    for (int i = 0; i < TL_MANY; i++)
        for (int k = 0; k < TL_EL; k++)
            assert_true(out[i * TL_EL + k] == (float)(101 * k + 1));
    for (int c = 0; c < 2; c++) {
        assert_int_equal(tl_proc_fds(tl_chip_pid(w, c), &b1[c]), fds0[c]);
        assert_int_equal(b1[c], b0[c]);
    }
    PX_ASSERT_OK(px_worker_destroy(w));
    free(out);
}

/* ---- item 4: a member killed during px_domain_alloc ---- */

typedef struct tl_kill {
    px_worker *w;
    _Atomic int go;          /* the orchestration is about to allocate */
    long delay_us;           /* then the killer waits this long and kills chip 2 */
    int allocs;              /* allocations that succeeded before the failure */
    int failed;              /* one failed */
    int fds0[2], fds1[2];    /* chips 0 and 1: descriptors before, and after the failure */
    long long b0[2], b1[2];
} tl_kill;

static void *tl_killer(void *arg)
{
    tl_kill *k = arg;
    struct timespec ts = {.tv_sec = 0, .tv_nsec = k->delay_us * 1000};

    if (px_test_wait_flag(&k->go, 60.0) == 0) {
        nanosleep(&ts, NULL); /* where in the allocation the fault lands, not a synchronisation */
        kill(tl_chip_pid(k->w, 2), SIGKILL);
    }
    return NULL;
}

/* Allocates and releases 3-chip domains until one fails (chip 2 is killed meanwhile), then
 * counts the survivors' descriptors. */
static px_status tl_kill_orch(px_orch *o, const px_task_args *args, void *user)
{
    static const int chips[3] = {0, 1, 2};
    px_domain_buffer b = {"x", 1 << 16};
    px_domain_spec s = {PX_DOMAIN_SPEC_HEADER,
                        .chips = chips, .nchips = 3, .window_bytes = 1 << 16, .buffers = &b,
                        .nbuffers = 1};
    tl_kill *k = user;
    uint64_t until = px_test_deadline_ns(30.0);

    for (int c = 0; c < 2; c++)
        k->fds0[c] = tl_proc_fds(tl_chip_pid(k->w, c), &k->b0[c]);
    atomic_store(&k->go, 1);
    for (int i = 0; px_test_now_ns() < until; i++) {
        char name[32];
        px_domain *d;

        snprintf(name, sizeof(name), "k%d", i);
        s.name = name;
        if (px_domain_alloc(o, &s, &d) != PX_OK) {
            k->failed = 1;
            break;
        }
        k->allocs++;
        (void)px_domain_release(d);
    }
    for (int c = 0; c < 2; c++)
        k->fds1[c] = tl_proc_fds(tl_chip_pid(k->w, c), &k->b1[c]);
    return PX_OK;
}

/* Chip 2 of 3 is killed at a different moment of an allocation in each of 8 trials (0 to
 * 1.4 ms after the loop of allocations starts): the allocation fails, and right after it
 * chips 0 and 1 hold the descriptors they held before (it used to leave the windows and
 * staging memory it had handed out in their tables, in most trials); the worker destroys
 * cleanly and nothing is left in /dev/shm. */
static void test_kill_during_alloc_leaves_nothing(void **state)
{
    int shm0 = px_test_shm_plexus_entries(), fd0 = px_test_open_fds();

    for (int trial = 0; trial < 8; trial++) {
        tl_kill k = {.delay_us = 200 * trial};
        pthread_t t;

        k.w = tl_worker(3);
        assert_int_equal(pthread_create(&t, NULL, tl_killer, &k), 0);
        (void)px_run(k.w, tl_kill_orch, NULL, &k); /* fails: a member died */
        pthread_join(t, NULL);
        assert_true(k.failed);
        for (int c = 0; c < 2; c++) {
            if (k.fds1[c] != k.fds0[c] || k.b1[c] != k.b0[c])
                print_error("trial %d (after %d allocations): chip %d holds %d descriptors "
                            "(%lld memfd bytes), %d (%lld) before\n", trial, k.allocs, c,
                            k.fds1[c], k.b1[c], k.fds0[c], k.b0[c]);
            assert_int_equal(k.fds1[c], k.fds0[c]);
            assert_int_equal(k.b1[c], k.b0[c]);
        }
        PX_ASSERT_OK(px_worker_destroy(k.w));
    }
    assert_int_equal(px_test_shm_plexus_entries(), shm0);
    assert_int_equal(px_test_open_fds(), fd0);
}

/* ---- item 7: a handle used after px_worker_destroy ---- */

static px_status tl_keep_orch(px_orch *o, const px_task_args *args, void *user)
{
    static const int chips[2] = {0, 1};
    px_domain_buffer b = {"x", 4096};
    px_domain_spec s = {PX_DOMAIN_SPEC_HEADER,
                        .name = "kept", .chips = chips, .nchips = 2, .window_bytes = 4096,
                        .buffers = &b, .nbuffers = 1};

    return px_domain_alloc(o, &s, (px_domain **)user);
}

/* A domain kept (not released) when its worker is destroyed: every call on the handle
 * afterwards is refused (size -1, name "", transport NULL, release and px_args_domain
 * PX_EINVAL naming px_worker_destroy) without reading the freed handle; under ASan a read of
 * it (px_domain_size used to) is a heap-use-after-free and fails the test. */
static void test_handle_after_destroy(void **state)
{
    px_worker *w = tl_worker(2);
    px_domain *d = NULL;
    px_task_args a;

    PX_ASSERT_OK(px_run(w, tl_keep_orch, NULL, &d));
    assert_non_null(d);
    assert_int_equal(px_domain_size(d), 2);
    PX_ASSERT_OK(px_worker_destroy(w));
    assert_int_equal(px_domain_size(d), -1);
    assert_string_equal(px_domain_name(d), "");
    assert_null(px_domain_transport(d, 0, 1));
    assert_null(px_domain_transport_reason(d, 0, 1));
    assert_int_equal(px_domain_release(d), PX_EINVAL);
    assert_non_null(strstr(px_last_error(), "px_worker_destroy"));
    px_args_init(&a);
    assert_int_equal(px_args_domain(&a, d), PX_EINVAL);
    assert_int_equal(a.n, 0);
}

/* ---- item 11: a chip stopped inside an allreduce loop ---- */

#define TL_STOP_COMM_S 2.0 /* PLEXUS_COMM_TIMEOUT_S of the test */
#define TL_STOP_RUN_S 4.0  /* PLEXUS_TIMEOUT_S of the test */

typedef struct tl_stop {
    px_domain *d;
    int iters;             /* allreduces submitted in run 2 */
} tl_stop;

/* Run 1 allocates the domain (chips 0, 1, 2) and keeps it; run 2 submits 200 allreduces. */
static px_status tl_stop_orch(px_orch *o, const px_task_args *args, void *user)
{
    static const int chips[3] = {0, 1, 2};
    px_domain_buffer b = {"x", 1 << 16};
    px_domain_spec s = {PX_DOMAIN_SPEC_HEADER,
                        .name = "stop", .chips = chips, .nchips = 3, .window_bytes = 1 << 16,
                        .buffers = &b, .nbuffers = 1};
    tl_stop *t = user;
    px_status st = PX_OK;

    if (t->d == NULL)
        return px_domain_alloc(o, &s, &t->d);
    for (int i = 0; i < 200 && st == PX_OK; i++)
        if ((st = px_submit_allreduce(o, t->d, "x", 1 << 14, PX_F32, PX_OP_SUM, NULL)) ==
            PX_OK)
            t->iters++;
    return st == PX_EABORTED ? PX_OK : st; /* the run's failure is its first task's */
}

/* With PLEXUS_COMM_TIMEOUT_S 2 and PLEXUS_TIMEOUT_S 4 (both times PLEXUS_TEST_SLACK), chip 1
 * of 3 is stopped (SIGSTOP) just before a run of 200 allreduces on a domain of all three:
 * the survivors' first allreduce
 * fails at the comm deadline naming the silent rank; chip 1 is then killed, so the run ends
 * with PX_ETIMEDOUT within the comm deadline plus a little (it used to wait the 4 s of the run
 * deadline for the group, then 4 s in the run-end free of the domain, then 4 s at shutdown),
 * the worker destroys at once, and no chip process or /dev/shm entry is left. */
static void test_stopped_chip_ends_run_quickly(void **state)
{
    int shm0 = px_test_shm_plexus_entries(), fd0 = px_test_open_fds();
    px_config c;
    px_worker *w = NULL;
    tl_stop t = {0};
    char want[128];
    pid_t pid;
    uint64_t t0;
    double took, destroy_s;
    px_status st;

    px_test_config(&c, 1);
    c.level = 3;
    c.chips = 3;
    c.device_mem = 64ull << 20;
    c.heap_ring = 16ull << 20;
    c.timeout_s = TL_STOP_RUN_S * px_test_slack(); /* chip start-up takes this deadline too */
    c.comm_timeout_s = TL_STOP_COMM_S * px_test_slack();
    PX_ASSERT_OK(px_worker_create(&c, &w));
    PX_ASSERT_OK(px_worker_init(w));
    PX_ASSERT_OK(px_run(w, tl_stop_orch, NULL, &t));
    assert_non_null(t.d);
    pid = tl_chip_pid(w, 1);
    tl_stop_chip(pid);
    t0 = px_test_now_ns();
    st = px_run(w, tl_stop_orch, NULL, &t);
    took = (double)(px_test_now_ns() - t0) / 1e9;
    print_message("run ended after %.2f s (%d allreduces submitted): %s: %s\n", took, t.iters,
                  px_status_name(st), px_last_error());
    assert_int_equal(st, PX_ETIMEDOUT);
    assert_non_null(strstr(px_last_error(), "barrier"));
    snprintf(want, sizeof(want), "for rank 1 on chip 1 (pid %d, stopped), which has not "
             "reached it", (int)pid);
    assert_non_null(strstr(px_last_error(), want));
    PX_ASSERT_BY(took, c.comm_timeout_s); /* not the run deadline (4 s x slack) */
    t0 = px_test_now_ns();
    PX_ASSERT_OK(px_worker_destroy(w));
    destroy_s = (double)(px_test_now_ns() - t0) / 1e9;
    print_message("destroy took %.2f s\n", destroy_s);
    PX_ASSERT_BY(destroy_s, 0); /* nothing left to wait for: at once */
    assert_int_equal(kill(pid, 0), -1); /* reaped: no such process */
    assert_int_equal(px_test_shm_plexus_entries(), shm0);
    assert_int_equal(px_test_open_fds(), fd0);
}

/* ---- item 11: a chip stopped in a copy task, in px_domain_alloc, in a user's kernel ---- */

#define TL_SIL_COMM_S 1.0 /* PLEXUS_COMM_TIMEOUT_S of these tests */
#define TL_SIL_RUN_S 2.0  /* PLEXUS_TIMEOUT_S of these tests ... */
#define TL_SIL_RUN_LONG_S 4.0 /* ... and of those whose bound is the comm deadline's */

enum { TL_SIL_COPY, TL_SIL_ALLOC, TL_SIL_BARRIER, TL_SIL_WAIT };

typedef struct tl_sil {
    int mode;              /* TL_SIL_* */
    px_domain *d;          /* run 1's domain (all but TL_SIL_ALLOC) */
} tl_sil;

static px_kernel_id tl_k_sil;
static px_callable_id tl_c_sil;

/* The user's own domain kernel: every rank enters a barrier (TL_SIL_BARRIER), or rank 0 waits
 * for signal 0, which rank 1 sets (TL_SIL_WAIT); scalar arg 0 is the mode. */
static px_status tl_sil_kernel(px_core_ctx *ctx, const px_task_args *a)
{
    px_comm *c = px_arg_comm(a, px_arg_count(a) - 1);

    if (c == NULL)
        return PX_EINVAL;
    if (px_arg_u64(a, 0) == TL_SIL_BARRIER)
        return px_comm_barrier(c);
    if (px_comm_rank(c) == 1)
        return px_comm_signal(c, 0, 0, PX_SIG_SET, 1);
    return px_comm_rank(c) == 0 ? px_comm_wait_until(c, 0, PX_CMP_EQ, 1, 0) : PX_OK;
}

static px_status tl_sil_callable(px_orch *o, const px_task_args *args, void *user)
{
    px_task_args a = *args;

    return px_submit(o, tl_k_sil, &a, NULL);
}

/* Run 1 (t->d NULL, all modes but TL_SIL_ALLOC) allocates the domain of chips 0, 1, 2 and
 * keeps it; run 2 does what the mode says with chip 1 stopped. */
static px_status tl_sil_orch(px_orch *o, const px_task_args *args, void *user)
{
    static const int chips[3] = {0, 1, 2};
    static const int64_t shape[1] = {256};
    px_domain_buffer b = {"x", 4096};
    px_domain_spec s = {PX_DOMAIN_SPEC_HEADER,
                        .name = "sil", .chips = chips, .nchips = 3, .window_bytes = 4096,
                        .buffers = &b, .nbuffers = 1, .nsignals = 1};
    tl_sil *t = user;
    px_task_args per[3];
    px_tensor x;
    px_status st;

    if (t->d == NULL) {
        st = px_domain_alloc(o, &s, &t->d);
        if (t->mode == TL_SIL_ALLOC && st == PX_OK)
            return px_set_error(PX_EKERNEL, "px_domain_alloc succeeded with chip 1 stopped");
        return st;
    }
    if (t->mode == TL_SIL_COPY) {
        if ((st = px_tensor_alloc(o, PX_F32, 1, shape, &x)) != PX_OK)
            return st;
        for (int i = 0; i < 300 && st == PX_OK; i++)
            st = i % 2 ? px_submit_domain_read(o, t->d, i / 2 % 3, "x", 0, &x, NULL)
                       : px_submit_domain_write(o, t->d, i / 2 % 3, "x", 0, &x, NULL);
        return st == PX_EABORTED ? PX_OK : st; /* the run's failure is its first task's */
    }
    for (int r = 0; r < 3; r++) {
        px_args_init(&per[r]);
        px_args_scalar_u64(&per[r], (uint64_t)t->mode);
    }
    return px_submit_domain_task(o, t->d, tl_c_sil, per, NULL);
}

/*
 * Chip 1 of 3 is stopped (SIGSTOP) before a run that needs it, with PLEXUS_COMM_TIMEOUT_S 1
 * and PLEXUS_TIMEOUT_S run_s (times PLEXUS_TEST_SLACK): the run fails naming chip 1 and its
 * pid by `deadline_s` (the deadline the run goes through, times the slack, as configured)
 * plus PX_TEST_LATE_S x slack, counted from the run's start to
 * the end of px_worker_destroy, with PX_ETIMEDOUT (a user's kernel: naming rank 1 on chip 1
 * and its pid); the chip was killed, nothing waited for it a second time, and no chip
 * process, descriptor or /dev/shm entry is left.
 */
static void tl_silent_case(int mode, double run_s_cfg, double deadline_s, const char *say)
{
    int shm0 = px_test_shm_plexus_entries(), fd0 = px_test_open_fds();
    px_config c;
    px_worker *w = NULL;
    tl_sil t = {.mode = mode};
    char pidtext[64], msg[PX_ERRMSG_MAX];
    pid_t pid;
    uint64_t t0;
    double run_s, total_s;
    px_status st;

    px_test_config(&c, 1);
    c.level = 3;
    c.chips = 3;
    c.device_mem = 64ull << 20;
    c.heap_ring = 16ull << 20;
    c.timeout_s = run_s_cfg * px_test_slack();
    c.comm_timeout_s = TL_SIL_COMM_S * px_test_slack();
    PX_ASSERT_OK(px_worker_create(&c, &w));
    PX_ASSERT_OK(px_kernel_register(w, "tl.sil", tl_sil_kernel, NULL, &tl_k_sil));
    PX_ASSERT_OK(px_callable_register(w, "tl.sil", tl_sil_callable, &tl_c_sil));
    PX_ASSERT_OK(px_worker_init(w));
    if (mode != TL_SIL_ALLOC) {
        PX_ASSERT_OK(px_run(w, tl_sil_orch, NULL, &t));
        assert_non_null(t.d);
    }
    pid = tl_chip_pid(w, 1);
    tl_stop_chip(pid);
    t0 = px_test_now_ns();
    st = px_run(w, tl_sil_orch, NULL, &t);
    run_s = (double)(px_test_now_ns() - t0) / 1e9;
    snprintf(msg, sizeof(msg), "%s", px_last_error());
    PX_ASSERT_OK(px_worker_destroy(w));
    total_s = (double)(px_test_now_ns() - t0) / 1e9;
    print_message("%s: run ended after %.2f s, destroyed after %.2f s (bound %.2f s): %s: %s\n",
                  say, run_s, total_s, px_test_bound_s(deadline_s * px_test_slack()),
                  px_status_name(st), msg);
    assert_int_equal(st, PX_ETIMEDOUT);
    snprintf(pidtext, sizeof(pidtext), "%schip 1 (pid %d",
             mode == TL_SIL_BARRIER || mode == TL_SIL_WAIT ? "rank 1 on " : "", (int)pid);
    assert_non_null(strstr(msg, pidtext));
    PX_ASSERT_BY(total_s, deadline_s * px_test_slack()); /* as configured: x slack */
    assert_int_equal(kill(pid, 0), -1); /* reaped: no such process */
    assert_int_equal(px_test_shm_plexus_entries(), shm0);
    assert_int_equal(px_test_open_fds(), fd0);
}

/* A copy task (px_submit_domain_write) to the stopped chip: the run's drain times out at
 * PLEXUS_TIMEOUT_S naming it, it is killed then, and nothing waits for it again. */
static void test_stopped_chip_in_copy(void **state)
{
    tl_silent_case(TL_SIL_COPY, TL_SIL_RUN_S, TL_SIL_RUN_S, "copy");
}

/* px_domain_alloc with a member stopped: its control call times out at PLEXUS_TIMEOUT_S
 * naming the chip, which is killed then, so the abort of the allocation, the run's end and
 * the shutdown do not wait for it again (it took 2 x PLEXUS_TIMEOUT_S). */
static void test_stopped_chip_in_alloc(void **state)
{
    tl_silent_case(TL_SIL_ALLOC, TL_SIL_RUN_S, TL_SIL_RUN_S, "alloc");
}

/* A user's domain kernel whose barrier waits for the stopped rank: the timeout at
 * PLEXUS_COMM_TIMEOUT_S names rank 1's chip and pid, and the chip is killed, as after a
 * collective's. */
static void test_stopped_chip_in_user_barrier(void **state)
{
    tl_silent_case(TL_SIL_BARRIER, TL_SIL_RUN_LONG_S, TL_SIL_COMM_S, "user barrier");
}

/* A user's domain kernel waiting (px_comm_wait_until) for a signal the stopped rank would
 * set: the timeout names the stopped rank's chip and pid, and the chip is killed. */
static void test_stopped_chip_in_user_wait(void **state)
{
    tl_silent_case(TL_SIL_WAIT, TL_SIL_RUN_LONG_S, TL_SIL_COMM_S, "user wait");
}

/* ---- item 6: windows the host cannot back ---- */

typedef struct tl_big {
    size_t window;
    px_status st;
    char msg[1024];
} tl_big;

static px_status tl_big_orch(px_orch *o, const px_task_args *args, void *user)
{
    static const int chips[3] = {0, 1, 2};
    tl_big *t = user;
    px_domain_buffer b = {"x", t->window};
    px_domain_spec s = {PX_DOMAIN_SPEC_HEADER,
                        .name = "big", .chips = chips, .nchips = 3, .window_bytes = t->window,
                        .buffers = &b, .nbuffers = 1};
    px_domain *d = NULL;

    t->st = px_domain_alloc(o, &s, &d);
    snprintf(t->msg, sizeof(t->msg), "%s", px_last_error());
    return t->st == PX_OK ? px_domain_release(d) : PX_OK;
}

/* 3 ranks x 8 TiB windows (far beyond this host's memory) are refused at allocation with
 * PX_ENOMEM giving the bytes needed, what the host can back and the knob (they used to be
 * accepted and fail on first touch); 3 x 1 MiB is accepted; with PLEXUS_COMM_MEM_MAX (the
 * config field) 2 MiB the 3 x 1 MiB domain is refused naming the knob, and nothing is left
 * on the chips by the refusals (a later 3 x 1 MiB domain works). */
static void test_windows_beyond_memory_refused(void **state)
{
    px_worker *w = tl_worker(3);
    tl_big t = {.window = 8ull << 40};
    px_config c;

    PX_ASSERT_OK(px_run(w, tl_big_orch, NULL, &t));
    assert_int_equal(t.st, PX_ENOMEM);
    assert_non_null(strstr(t.msg, "3 windows of 8796093022208 bytes"));
    assert_non_null(strstr(t.msg, "MemAvailable"));
    assert_non_null(strstr(t.msg, "PLEXUS_COMM_MEM_MAX"));
    t.window = 1 << 20;
    PX_ASSERT_OK(px_run(w, tl_big_orch, NULL, &t));
    PX_ASSERT_OK(t.st);
    PX_ASSERT_OK(px_worker_destroy(w));

    px_test_config(&c, 1);
    c.level = 3;
    c.chips = 3;
    c.timeout_s = 30.0 * px_test_slack();
    c.comm_mem_max = 2 << 20;
    PX_ASSERT_OK(px_worker_create(&c, &w));
    PX_ASSERT_OK(px_worker_init(w));
    PX_ASSERT_OK(px_run(w, tl_big_orch, NULL, &t));
    assert_int_equal(t.st, PX_ENOMEM);
    assert_non_null(strstr(t.msg, "more than PLEXUS_COMM_MEM_MAX (2097152)"));
    t.window = 512 << 10;
    PX_ASSERT_OK(px_run(w, tl_big_orch, NULL, &t));
    PX_ASSERT_OK(t.st);
    PX_ASSERT_OK(px_worker_destroy(w));
}

/* ---- the device arena's memory object ---- */

/* The mode bits and the name of the memfd in process pid whose name starts with prefix, or -1
 * when it has none. */
static int tl_memfd_mode(pid_t pid, const char *prefix, char *name, size_t n)
{
    char dir[64], path[384], link[256];
    DIR *dp;
    struct dirent *e;
    int mode = -1;

    snprintf(dir, sizeof(dir), "/proc/%d/fd", (int)pid);
    if ((dp = opendir(dir)) == NULL)
        return -1;
    while (mode < 0 && (e = readdir(dp)) != NULL) {
        struct stat sb;
        ssize_t len;

        snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
        if (e->d_name[0] == '.' || (len = readlink(path, link, sizeof(link) - 1)) < 0)
            continue;
        link[len] = '\0';
        if (strncmp(link, "/memfd:", 7) == 0 && strncmp(link + 7, prefix, strlen(prefix)) == 0 &&
            stat(path, &sb) == 0) {
            mode = (int)(sb.st_mode & 07777);
            snprintf(name, n, "%s", link + 7);
        }
    }
    closedir(dp);
    return mode;
}

/* Every chip's device arena is a memfd of mode 0600 (it was 0777) named after the chip and its
 * pid, "plexus-chip<i>-pid<pid>" (every chip's was "plexus-chip0"). */
static void test_arena_memfd_private_and_named(void **state)
{
    px_worker *w = tl_worker(2);

    for (int c = 0; c < 2; c++) {
        char want[64], name[256] = "";
        pid_t pid = tl_chip_pid(w, c);
        int mode;

        snprintf(want, sizeof(want), "plexus-chip%d-pid%d", c, (int)pid);
        mode = tl_memfd_mode(pid, want, name, sizeof(name));
        if (mode != 0600)
            print_error("chip %d (pid %d): no memfd \"%s\" of mode 0600 (found \"%s\", mode "
                        "%o)\n", c, (int)pid, want, name, mode);
        assert_int_equal(mode, 0600);
        assert_true(strncmp(name, want, strlen(want)) == 0 &&
                    (name[strlen(want)] == ' ' || name[strlen(want)] == '\0'));
    }
    PX_ASSERT_OK(px_worker_destroy(w));
}

/* Runs every test, or those whose names match argv[1] (a cmocka filter, e.g. "*kill*"). */
int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_one_member_domain_leaks_nothing),
        cmocka_unit_test(test_thousand_domains_in_one_run),
        cmocka_unit_test(test_kill_during_alloc_leaves_nothing),
        cmocka_unit_test(test_handle_after_destroy),
        cmocka_unit_test(test_stopped_chip_ends_run_quickly),
        cmocka_unit_test(test_stopped_chip_in_copy),
        cmocka_unit_test(test_stopped_chip_in_alloc),
        cmocka_unit_test(test_stopped_chip_in_user_barrier),
        cmocka_unit_test(test_stopped_chip_in_user_wait),
        cmocka_unit_test(test_windows_beyond_memory_refused),
        cmocka_unit_test(test_arena_memfd_private_and_named),
    };

    if (argc > 1)
        cmocka_set_test_filter(argv[1]);
    return cmocka_run_group_tests(tests, NULL, NULL);
}
