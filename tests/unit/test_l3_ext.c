/*
 * test_l3_ext.c - the extension points of level 3 (src/hier/ext.h): control calls, chip
 * services and file-descriptor passing.
 *
 * Also the registry of the layers above: hooks, their extension slot (hier_hooks_arg), and
 * chip kernels and callables registered from the init hook (hier_kernel_register,
 * hier_callable_register: the callable gets its arg, the kernel runs by its id).
 *
 * The handlers run inside the chip processes and answer with what they see there (their pid,
 * their chip index, bytes read from a descriptor, their descriptor count), so the test
 * compares with what it knows independently: px_hier_proc_pid, the bytes it wrote itself.
 * Where the parent must see a chip *while* it runs (a kernel in progress, a handler entered),
 * the chip writes a word of a MAP_SHARED anonymous region mapped before the fork. Every wait
 * is bounded and scaled by PLEXUS_TEST_SLACK; nothing sleeps to synchronise.
 * Multi-process: ctest runs it under RESOURCE_LOCK "chips" (tests/system/l3.cmake).
 */
#include "testutil.h"

#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "hier/ext.h"
#include "hier/hier.h"

#define EXT_WAIT_S 20.0 /* bound of every wait inside a chip */
#define EXT_DEATH_SEEN_S 0.1 /* the watch looks at the pidfds every PX_HIER_CHECK_NS (100 ms) */

/* Words the chips and the parent share (mapped before the fork). */
typedef struct ext_shared {
    _Atomic uint32_t kernel_state; /* 1 while the long kernel runs, 2 after */
    _Atomic uint32_t entered;      /* the hold handler was entered */
    _Atomic uint32_t stops;        /* service stop() calls */
    _Atomic uint32_t layer_runs;   /* the layer kernel's runs, plus 100 for each one whose
                                    * callable got the layer's arg */
} ext_shared;

static ext_shared *g_sh;
static int k_ping, k_oping, k_hold, k_fail, k_fdread, k_fdmake, k_fdcount;
static px_kernel_id k_long;
static px_callable_id c_long;
static pid_t g_service_pid; /* written by the service's start() inside each chip */

/* ---- helpers ---- */

static uint64_t ext_ns(void)
{
    return px_test_now_ns();
}



static int ext_wait_word(_Atomic uint32_t *w, uint32_t want, double seconds)
{
    uint64_t deadline = px_test_deadline_ns(seconds);

    while (atomic_load(w) < want) {
        if (ext_ns() > deadline)
            return -1;
        sched_yield();
    }
    return 0;
}

/* ---- handlers (run in the chips) ---- */

/* ping: reply {pid, chip index, payload u64 + chip index, service pid}. */
static px_status ping_cb(hier_chip *chip, void *arg, const void *payload, size_t n,
                         void *reply, size_t *reply_n)
{
    int64_t r[4] = {getpid(), hier_chip_index(chip), 0, g_service_pid};
    uint64_t v = 0;

    if (n == sizeof(v))
        memcpy(&v, payload, sizeof(v));
    r[2] = (int64_t)v + hier_chip_index(chip);
    memcpy(reply, r, sizeof(r));
    *reply_n = sizeof(r);
    return PX_OK;
}

/* hold: the chip named in the payload announces itself and waits (bounded) forever; the
 * others answer at once. */
static px_status hold_cb(hier_chip *chip, void *arg, const void *payload, size_t n,
                         void *reply, size_t *reply_n)
{
    int victim = -1;
    uint64_t deadline = px_test_deadline_ns(EXT_WAIT_S);

    memcpy(&victim, payload, sizeof(victim));
    if (hier_chip_index(chip) != victim)
        return PX_OK;
    atomic_store(&g_sh->entered, 1);
    while (ext_ns() < deadline)
        sched_yield();
    return px_set_error(PX_ETIMEDOUT, "hold: nobody killed chip %d", victim);
}

/* fail: chip 0 refuses the payload with an error; the others answer PX_OK. */
static px_status fail_cb(hier_chip *chip, void *arg, const void *payload, size_t n,
                         void *reply, size_t *reply_n)
{
    int v = 0;

    memcpy(&v, payload, sizeof(v));
    if (hier_chip_index(chip) == 0)
        return px_set_error(PX_EINVAL, "bad payload %d in pid %d", v, (int)getpid());
    return PX_OK;
}

/* fdread: take the descriptor received under the payload's tag, reply its first 64 bytes and
 * its mode, close it. */
static px_status fdread_cb(hier_chip *chip, void *arg, const void *payload, size_t n,
                           void *reply, size_t *reply_n)
{
    uint64_t tag;
    struct stat sb;
    char *out = reply;
    int fd;
    px_status st;

    memcpy(&tag, payload, sizeof(tag));
    if ((st = hier_chip_fd_take(chip, tag, &fd)) != PX_OK)
        return st;
    if (fstat(fd, &sb) != 0 || pread(fd, out + 4, 64, 0) != 64) {
        close(fd);
        return px_set_error(PX_EIO, "fdread: cannot read descriptor of tag %llu",
                            (unsigned long long)tag);
    }
    memcpy(out, &(uint32_t){(uint32_t)(sb.st_mode & 0777)}, 4);
    close(fd);
    *reply_n = 68;
    return PX_OK;
}

/* fdmake: payload {tag, 64 bytes}: make a memfd holding the bytes, offer it under tag. */
static px_status fdmake_cb(hier_chip *chip, void *arg, const void *payload, size_t n,
                           void *reply, size_t *reply_n)
{
    uint64_t tag;
    int fd;
    px_status st;

    memcpy(&tag, payload, sizeof(tag));
    if ((st = hier_memfd_create("ext-test", 4096, &fd)) != PX_OK)
        return st;
    if (pwrite(fd, (const char *)payload + 8, 64, 0) != 64)
        st = px_set_error(PX_EIO, "fdmake: write failed");
    else
        st = hier_chip_fd_offer(chip, tag, fd);
    close(fd);
    return st;
}

/* fdcount: reply this chip's descriptor count. */
static px_status fdcount_cb(hier_chip *chip, void *arg, const void *payload, size_t n,
                            void *reply, size_t *reply_n)
{
    int c = px_test_open_fds();

    memcpy(reply, &c, sizeof(c));
    *reply_n = sizeof(c);
    return PX_OK;
}

/* The test's chip service: start() records the chip's pid, stop() counts itself. */
static px_status svc_start(hier_chip *chip, void *arg)
{
    g_service_pid = getpid();
    return PX_OK;
}

static void svc_stop(hier_chip *chip, void *arg)
{
    atomic_fetch_add(&g_sh->stops, 1);
}

/* long: runs about 2 s (times the slack) on core 0, announcing its start and end in the
 * shared words. */
static px_status long_kernel(px_core_ctx *ctx, const px_task_args *a)
{
    uint64_t end = px_test_deadline_ns(2.0);

    atomic_store(&g_sh->kernel_state, 1);
    while (ext_ns() < end)
        sched_yield();
    atomic_store(&g_sh->kernel_state, 2);
    return PX_OK;
}

static px_status long_callable(px_orch *o, const px_task_args *a, void *u)
{
    px_task_args args = *a;

    return px_submit(o, k_long, &args, NULL);
}

/* ---- the worker ---- */

static px_worker *ext_worker(int chips)
{
    px_config c;
    px_worker *w = NULL;

    px_test_config(&c, 1);
    c.level = 3;
    c.chips = chips;
    c.cores = 1; /* each chip's only core is its main thread */
    c.device_mem = 64ull << 20;
    c.heap_ring = 16ull << 20;
    PX_ASSERT_OK(px_worker_create(&c, &w));
    PX_ASSERT_OK(hier_ctl_register(w, "test.ping", HIER_CTL_SERVICE, ping_cb, NULL, &k_ping));
    PX_ASSERT_OK(hier_ctl_register(w, "test.oping", HIER_CTL_ORDERED, ping_cb, NULL,
                                   &k_oping));
    PX_ASSERT_OK(hier_ctl_register(w, "test.hold", HIER_CTL_SERVICE, hold_cb, NULL, &k_hold));
    PX_ASSERT_OK(hier_ctl_register(w, "test.fail", HIER_CTL_SERVICE, fail_cb, NULL, &k_fail));
    PX_ASSERT_OK(hier_ctl_register(w, "test.fdread", HIER_CTL_SERVICE, fdread_cb, NULL,
                                   &k_fdread));
    PX_ASSERT_OK(hier_ctl_register(w, "test.fdmake", HIER_CTL_SERVICE, fdmake_cb, NULL,
                                   &k_fdmake));
    PX_ASSERT_OK(hier_ctl_register(w, "test.fdcount", HIER_CTL_SERVICE, fdcount_cb, NULL,
                                   &k_fdcount));
    PX_ASSERT_OK(hier_service_register(w, "test.svc", svc_start, svc_stop, NULL));
    PX_ASSERT_OK(px_kernel_register(w, "long", long_kernel, NULL, &k_long));
    PX_ASSERT_OK(px_callable_register(w, "long", long_callable, &c_long));
    PX_ASSERT_OK(px_worker_init(w));
    return w;
}

static int ext_setup(void **state)
{
    g_sh = mmap(NULL, sizeof(*g_sh), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    assert_true(g_sh != MAP_FAILED);
    memset(g_sh, 0, sizeof(*g_sh));
    return 0;
}

static int ext_teardown(void **state)
{
    munmap(g_sh, sizeof(*g_sh));
    return 0;
}

/* ---- control calls ---- */

/* A control call to every chip of a 4-chip worker, on each route, is answered by every chip
 * from its own process (pid, index, the payload seen there); the service's start() ran in
 * each chip and its stop() runs once per chip when the worker is destroyed. */
static void test_ctl_all_chips(void **state)
{
    int chips[4] = {0, 1, 2, 3};
    px_worker *w;

    atomic_store(&g_sh->stops, 0);
    w = ext_worker(4); /* registers the kinds */
    for (int k = 0; k < 2; k++) {
        int kinds[2] = {k_ping, k_oping};
        hier_call_result res[4];
        uint64_t v = 1000 + (uint64_t)k;

        PX_ASSERT_OK(hier_call_run(w, kinds[k], &v, sizeof(v), chips, 4, 10, res));
        for (int i = 0; i < 4; i++) {
            int64_t r[4];

            assert_int_equal(res[i].chip, i);
            assert_int_equal(res[i].st, PX_OK);
            assert_int_equal(res[i].reply_n, sizeof(r));
            memcpy(r, res[i].reply, sizeof(r));
            assert_int_equal(r[0], px_hier_proc_pid(w, i));
            assert_int_equal(r[1], i);
            assert_int_equal(r[2], (int64_t)v + i);
            assert_int_equal(r[3], px_hier_proc_pid(w, i)); /* the service started there */
        }
    }
    assert_int_equal(hier_chip_self(), NULL); /* the parent is no chip */
    PX_ASSERT_OK(px_worker_destroy(w));
    assert_int_equal(atomic_load(&g_sh->stops), 4);
}

/* Bad requests are refused before anything is posted; late registration is refused. */
static void test_ctl_bad_requests(void **state)
{
    px_worker *w = ext_worker(2);
    int dup[2] = {1, 1}, bad[1] = {2}, one[1] = {0};
    hier_call *call = NULL;
    char big[8192] = {0};

    assert_int_equal(hier_call_post(w, k_ping, NULL, 0, dup, 2, &call), PX_EINVAL);
    assert_non_null(strstr(px_last_error(), "chip 1 is listed twice"));
    assert_int_equal(hier_call_post(w, k_ping, NULL, 0, bad, 1, &call), PX_EINVAL);
    assert_non_null(strstr(px_last_error(), "chip 2 does not exist"));
    assert_int_equal(hier_call_post(w, 99, NULL, 0, one, 1, &call), PX_EINVAL);
    assert_int_equal(hier_call_post(w, k_ping, big, sizeof(big), one, 1, &call), PX_EINVAL);
    assert_int_equal(hier_ctl_register(w, "late", HIER_CTL_SERVICE, ping_cb, NULL, NULL),
                     PX_ESTATE);
    assert_int_equal(hier_service_register(w, "late", svc_start, NULL, NULL), PX_ESTATE);
    assert_null(call);
    PX_ASSERT_OK(px_worker_destroy(w));
}

/* A handler's error reaches the parent as that chip's answer, with the chip's message and
 * pid; the other chips' answers are kept. */
static void test_ctl_handler_error(void **state)
{
    px_worker *w = ext_worker(2);
    int chips[2] = {0, 1}, v = 7;
    hier_call_result res[2];
    char want[96];

    assert_int_equal(hier_call_run(w, k_fail, &v, sizeof(v), chips, 2, 10, res), PX_EINVAL);
    snprintf(want, sizeof(want), "chip 0 (pid %d), control call \"test.fail\": bad payload 7 "
             "in pid %d", (int)px_hier_proc_pid(w, 0), (int)px_hier_proc_pid(w, 0));
    assert_non_null(strstr(px_last_error(), want));
    assert_int_equal(res[0].st, PX_EINVAL);
    assert_int_equal(res[1].st, PX_OK);
    PX_ASSERT_OK(px_worker_destroy(w));
}

/* A service whose start() fails on chip 1 fails px_worker_init with the chip's message. */
static px_status bad_start(hier_chip *chip, void *arg)
{
    if (hier_chip_index(chip) == 1)
        return px_set_error(PX_EIO, "no widget on this chip");
    return PX_OK;
}

static void test_service_start_fails(void **state)
{
    px_config c;
    px_worker *w = NULL;

    px_test_config(&c, 1);
    c.level = 3;
    c.chips = 2;
    c.cores = 1;
    c.device_mem = 64ull << 20;
    c.heap_ring = 16ull << 20;
    PX_ASSERT_OK(px_worker_create(&c, &w));
    PX_ASSERT_OK(hier_service_register(w, "test.bad", bad_start, NULL, NULL));
    assert_int_equal(hier_service_register(w, "test.bad", bad_start, NULL, NULL), PX_EINVAL);
    assert_int_equal(px_worker_init(w), PX_EIO);
    assert_non_null(strstr(px_last_error(), "chip 1 (pid"));
    assert_non_null(strstr(px_last_error(),
                           "chip 1: service \"test.bad\" did not start: no widget on this chip"));
    PX_ASSERT_OK(px_worker_destroy(w));
}

/* Kills chip `victim` and waits until it has gone. */
static void ext_kill(px_worker *w, int victim)
{
    pid_t pid = px_hier_proc_pid(w, victim);
    uint64_t deadline = px_test_deadline_ns(EXT_WAIT_S);

    assert_int_equal(kill(pid, SIGKILL), 0);
    for (;;) { /* a zombie until the watch thread reaps it */
        char path[64];
        FILE *f;
        char st = 'R';

        snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
        if ((f = fopen(path, "r")) == NULL)
            break;
        if (fscanf(f, "%*d %*s %c", &st) != 1)
            st = 'R';
        fclose(f);
        if (st == 'Z')
            break;
        assert_true(ext_ns() < deadline);
        sched_yield();
    }
}

/* A control call to a chip killed beforehand fails with PX_EPEERDEAD naming the chip, its pid
 * and the signal, by the watch's next look at the pidfds (not the call's 30 s deadline),
 * while the other chips answer; the same on the ordered route. */
static void test_ctl_dead_chip(void **state)
{
    px_worker *w = ext_worker(3);
    int chips[3] = {0, 1, 2};
    pid_t pid = px_hier_proc_pid(w, 1);
    char want[64];

    ext_kill(w, 1);
    snprintf(want, sizeof(want), "chip 1 (pid %d) died", (int)pid);
    for (int k = 0; k < 2; k++) {
        hier_call_result res[3];
        uint64_t t0 = ext_ns();

        assert_int_equal(hier_call_run(w, k == 0 ? k_ping : k_oping, NULL, 0, chips, 3, 30, res),
                         PX_EPEERDEAD);
        PX_ASSERT_BY((double)(ext_ns() - t0) / 1e9, EXT_DEATH_SEEN_S);
        assert_non_null(strstr(px_last_error(), want));
        assert_non_null(strstr(px_last_error(), "SIGKILL"));
        assert_int_equal(res[0].st, PX_OK);
        assert_int_equal(res[1].st, PX_EPEERDEAD);
        assert_int_equal(res[2].st, PX_OK);
    }
    PX_ASSERT_OK(px_worker_destroy(w));
}

/* A chip killed while its handler runs fails the call with PX_EPEERDEAD naming it, long
 * before the call's deadline (30 s) and the handler's own bound (20 s). */
static void test_ctl_killed_during_call(void **state)
{
    px_worker *w = ext_worker(2);
    int chips[2] = {0, 1}, victim = 1;
    pid_t pid = px_hier_proc_pid(w, 1);
    hier_call *call;
    uint64_t t0;
    char want[64];

    atomic_store(&g_sh->entered, 0);
    PX_ASSERT_OK(hier_call_post(w, k_hold, &victim, sizeof(victim), chips, 2, &call));
    assert_int_equal(ext_wait_word(&g_sh->entered, 1, EXT_WAIT_S), 0);
    t0 = ext_ns();
    assert_int_equal(kill(pid, SIGKILL), 0);
    assert_int_equal(hier_call_wait(call, 30), PX_EPEERDEAD);
    PX_ASSERT_BY((double)(ext_ns() - t0) / 1e9, EXT_DEATH_SEEN_S);
    snprintf(want, sizeof(want), "chip 1 (pid %d) died: killed by signal 9", (int)pid);
    assert_non_null(strstr(px_last_error(), want));
    assert_non_null(strstr(px_last_error(), "was in flight on it"));
    assert_int_equal(hier_call_result_of(call, 0)->st, PX_OK);
    hier_call_free(call);
    PX_ASSERT_OK(px_worker_destroy(w));
}

/* A call that nobody answers in time fails with PX_ETIMEDOUT naming the chip, which is then
 * killed as silent (so no later wait, such as the shutdown, waits for it again); its late
 * answer is dropped, and a later call to it fails at once (by the watch's next look) with
 * PX_EPEERDEAD giving why. */
static void test_ctl_timeout(void **state)
{
    px_worker *w = ext_worker(1);
    int chips[1] = {0}, victim = 0;
    hier_call_result res[1];
    uint64_t t0 = ext_ns();

    atomic_store(&g_sh->entered, 0);
    assert_int_equal(hier_call_run(w, k_hold, &victim, sizeof(victim), chips, 1, 0.3, res),
                     PX_ETIMEDOUT);
    assert_true(ext_ns() - t0 >= 300000000ull);
    PX_ASSERT_BY((double)(ext_ns() - t0) / 1e9, 0.3); /* the call's 0.3 s timeout */
    assert_non_null(strstr(px_last_error(), "chip 0"));
    assert_non_null(strstr(px_last_error(), "did not answer control call \"test.hold\""));
    assert_non_null(strstr(px_last_error(), "plexus killed it (SIGKILL)"));
    t0 = ext_ns();
    assert_int_equal(hier_call_run(w, k_hold, &victim, sizeof(victim), chips, 1, 0, res),
                     PX_EPEERDEAD);
    /* at once once the watch has reaped the chip it killed: by its next look at the latest */
    PX_ASSERT_BY((double)(ext_ns() - t0) / 1e9, EXT_DEATH_SEEN_S);
    assert_non_null(strstr(px_last_error(), "killed by plexus: control call \"test.hold\" "
                                            "waited for it past its deadline"));
    PX_ASSERT_OK(px_worker_destroy(w));
}

/* ---- a service thread answers while core 0 runs a kernel ---- */

static px_worker *g_during_w;

static px_status during_orch(px_orch *o, const px_task_args *args, void *user)
{
    int64_t *answer_ns = user; /* [0]: answer time after the kernel started, [1]: state */
    px_worker *w = g_during_w;
    int chip0[1] = {0};
    hier_call_result res;
    px_task_args a;
    uint64_t t0;
    px_status st;

    px_args_init(&a);
    if ((st = px_submit_next_level(o, c_long, &a, 0, NULL)) != PX_OK)
        return st;
    if (ext_wait_word(&g_sh->kernel_state, 1, EXT_WAIT_S) != 0)
        return px_set_error(PX_ETIMEDOUT, "the long kernel did not start");
    t0 = ext_ns();
    if ((st = hier_call_run(w, k_ping, NULL, 0, chip0, 1, 10, &res)) != PX_OK)
        return st;
    answer_ns[0] = (int64_t)(ext_ns() - t0);
    answer_ns[1] = atomic_load(&g_sh->kernel_state);
    return PX_OK;
}

/* A chip whose only core (its main thread) is inside a 2-second kernel answers a control call
 * of the service route from its service thread at once: the answer arrives while the kernel
 * still runs, by deadline 0 + slack (the service thread is woken; less than the kernel's 2 s
 * times the slack). */
static void test_service_answers_during_kernel(void **state)
{
    px_worker *w = ext_worker(1);
    int64_t answer[2] = {-1, -1};

    atomic_store(&g_sh->kernel_state, 0);
    g_during_w = w;
    PX_ASSERT_OK(px_run(w, during_orch, NULL, answer));
    assert_int_equal(answer[1], 1); /* the kernel was still running */
    assert_true(answer[0] >= 0);
    PX_ASSERT_BY((double)answer[0] / 1e9, 0.0); /* at once: the service thread is woken */
    assert_int_equal(atomic_load(&g_sh->kernel_state), 2);
    PX_ASSERT_OK(px_worker_destroy(w));
}

/* ---- file descriptors ---- */

/* Fills 64 bytes with a pattern named by seed. */
static void ext_pattern(char *b, int seed)
{
    for (int i = 0; i < 64; i++)
        b[i] = (char)('a' + (i * 7 + seed) % 26);
}

/* Returns chip i's descriptor count. */
static int ext_chip_fds(px_worker *w, int i)
{
    hier_call_result res;
    int n;

    PX_ASSERT_OK(hier_call_run(w, k_fdcount, NULL, 0, &i, 1, 10, &res));
    memcpy(&n, res.reply, sizeof(n));
    return n;
}

/* Makes a memfd on chip `chip` holding pattern seed, offered under tag. */
static void ext_chip_make(px_worker *w, int chip, uint64_t tag, int seed)
{
    char payload[72];

    memcpy(payload, &tag, 8);
    ext_pattern(payload + 8, seed);
    PX_ASSERT_OK(hier_call_run(w, k_fdmake, payload, sizeof(payload), &chip, 1, 10, NULL));
}

/* Checks that chip `chip` received under tag a descriptor holding pattern seed, mode 0600. */
static void ext_chip_check(px_worker *w, int chip, uint64_t tag, int seed)
{
    hier_call_result res;
    char want[64];
    uint32_t mode;

    PX_ASSERT_OK(hier_call_run(w, k_fdread, &tag, sizeof(tag), &chip, 1, 10, &res));
    ext_pattern(want, seed);
    memcpy(&mode, res.reply, 4);
    assert_int_equal(mode, 0600);
    assert_memory_equal(res.reply + 4, want, 64);
}

/* Memfds move parent -> chip, chip -> parent and chip -> chip (fetched from several chips at
 * once, sent to several in one batch, one list of them over two messages): the
 * bytes written on one side are read on the other, every object has mode 0600, nothing
 * appears in /dev/shm, and no process's descriptor count changes. */
static void test_fd_passing(void **state)
{
    px_worker *w = ext_worker(2);
    int shm0 = px_test_shm_plexus_entries(), fds0 = px_test_open_fds();
    int c0 = ext_chip_fds(w, 0), c1 = ext_chip_fds(w, 1);
    char buf[64], want[64];
    struct stat sb;
    int fd;

    /* parent -> chip 0 */
    PX_ASSERT_OK(hier_memfd_create("ext-parent", 4096, &fd));
    ext_pattern(buf, 1);
    assert_int_equal(pwrite(fd, buf, 64, 0), 64);
    PX_ASSERT_OK(hier_fd_send(w, 0, 11, fd, 10));
    close(fd);
    ext_chip_check(w, 0, 11, 1);
    /* chip 1 -> parent */
    ext_chip_make(w, 1, 22, 2);
    PX_ASSERT_OK(hier_fd_fetch(w, 1, 22, &fd, 10));
    assert_int_equal(fstat(fd, &sb), 0);
    assert_int_equal(sb.st_mode & 0777, 0600);
    assert_int_equal(pread(fd, buf, 64, 0), 64);
    ext_pattern(want, 2);
    assert_memory_equal(buf, want, 64);
    close(fd);
    /* both chips -> parent at once, by a family of tags; then to the other chip, in one
     * batch to both */
    ext_chip_make(w, 0, 0x3300, 3);
    ext_chip_make(w, 1, 0x3301, 4);
    {
        int chips[2] = {0, 1}, got[2] = {-1, -1}, many[300];
        uint64_t t0[1] = {0x4400}, t1[300];
        hier_fd_list l[2] = {{.chip = 1, .n = 1, .tags = t0, .fds = &got[0]},
                             {.chip = 0, .n = 300, .tags = t1, .fds = many}};

        PX_ASSERT_OK(hier_fd_fetch_each(w, chips, 2, 0x3300, ~0xFFull, got, 10));
        /* chip 0 also gets 300 descriptors: two messages of one batch */
        for (int i = 0; i < 300; i++) {
            many[i] = got[1];
            t1[i] = 0x5000 + (uint64_t)i;
        }
        struct rlimit rl0, rl;

        /* a descriptor budget below the batch (half of RLIMIT_NOFILE: 256): the two chips
         * take theirs in two groups */
        assert_int_equal(getrlimit(RLIMIT_NOFILE, &rl0), 0);
        rl = rl0;
        rl.rlim_cur = 512;
        assert_int_equal(setrlimit(RLIMIT_NOFILE, &rl), 0);
        PX_ASSERT_OK(hier_fd_send_lists(w, l, 2, 10));
        assert_int_equal(setrlimit(RLIMIT_NOFILE, &rl0), 0);
        close(got[0]);
        close(got[1]);
        ext_chip_check(w, 1, 0x4400, 3);
        ext_chip_check(w, 0, 0x5000, 4);
        ext_chip_check(w, 0, 0x5000 + 299, 4);
        for (int i = 1; i < 299; i++)
            ext_chip_check(w, 0, 0x5000 + (uint64_t)i, 4);
    }
    /* nothing offered: an error, no descriptor */
    assert_int_equal(hier_fd_fetch(w, 0, 99, &fd, 10), PX_ENOENT);
    assert_non_null(strstr(px_last_error(), "offers no descriptor under tag 99"));

    assert_int_equal(px_test_open_fds(), fds0);
    assert_int_equal(ext_chip_fds(w, 0), c0);
    assert_int_equal(ext_chip_fds(w, 1), c1);
    assert_int_equal(px_test_shm_plexus_entries(), shm0);
    PX_ASSERT_OK(px_worker_destroy(w));
}

/* Passing a descriptor to a chip that died fails with PX_EPEERDEAD naming it, and leaves no
 * descriptor behind in the parent. */
static void test_fd_to_dead_chip(void **state)
{
    px_worker *w = ext_worker(2);
    pid_t pid = px_hier_proc_pid(w, 1);
    int fds0, fd, out = -1;
    char want[64];

    PX_ASSERT_OK(hier_memfd_create("ext-dead", 4096, &fd));
    fds0 = px_test_open_fds();
    ext_kill(w, 1);
    assert_int_equal(hier_fd_send(w, 1, 5, fd, 10), PX_EPEERDEAD);
    snprintf(want, sizeof(want), "chip 1 (pid %d) died", (int)pid);
    assert_non_null(strstr(px_last_error(), want));
    assert_non_null(strstr(px_last_error(), "SIGKILL"));
    assert_int_equal(hier_fd_fetch(w, 1, 5, &out, 10), PX_EPEERDEAD);
    assert_int_equal(out, -1);
    assert_int_equal(px_test_open_fds(), fds0);
    close(fd);
    /* the other chip still works */
    ext_chip_make(w, 0, 6, 4);
    PX_ASSERT_OK(hier_fd_fetch(w, 0, 6, &out, 10));
    close(out);
    assert_int_equal(px_test_open_fds(), fds0 - 1);
    PX_ASSERT_OK(px_worker_destroy(w));
}

/* ---- the layers above's registry ---- */

typedef struct ext_layer {
    px_worker *w;
    px_kernel_id k;
    px_callable_id c;
} ext_layer;

static ext_layer g_layer;

static px_status layer_kernel(px_core_ctx *ctx, const px_task_args *a)
{
    (void)ctx;
    atomic_fetch_add(&g_sh->layer_runs, (uint32_t)px_arg_u64(a, 0));
    return PX_OK;
}

/* The layer's callable: submits its kernel by the id kept in its arg. */
static px_status layer_callable(px_orch *o, const px_task_args *args, void *user)
{
    const ext_layer *l = user;
    px_task_args a;

    px_args_init(&a);
    px_args_scalar_u64(&a, user == &g_layer ? 101 : 1);
    return px_submit(o, l->k, &a, NULL);
}

static px_status layer_init(void *arg)
{
    ext_layer *l = arg;
    px_status st = hier_kernel_register(l->w, "layer.k", layer_kernel, NULL, &l->k);

    return st == PX_OK ? hier_callable_register(l->w, "layer.c", layer_callable, l, &l->c) : st;
}

static const hier_hooks layer_hooks = {.init = layer_init};
static const hier_hooks other_hooks = {.init = NULL};

static px_status layer_orch(px_orch *o, const px_task_args *args, void *user)
{
    px_task_args a;
    px_status st = PX_OK;

    (void)args;
    (void)user;
    for (int chip = 0; chip < 2 && st == PX_OK; chip++) {
        px_args_init(&a);
        st = px_submit_next_level(o, g_layer.c, &a, chip, NULL);
    }
    return st;
}

/* A layer's hooks give back its arg (and no other hooks' arg); its init hook registers a chip
 * kernel and a callable through the level-3 registry: on each chip the callable gets the
 * layer's arg and runs the kernel by its id, and the user's px_kernel_lookup does not see it. */
static void test_layer_registry(void **state)
{
    px_config c;
    px_kernel_id k;

    (void)state;
    px_test_config(&c, 1);
    c.level = 3;
    c.chips = 2;
    c.device_mem = 64ull << 20;
    c.heap_ring = 16ull << 20;
    PX_ASSERT_OK(px_worker_create(&c, &g_layer.w));
    assert_null(hier_hooks_arg(g_layer.w, &layer_hooks));
    PX_ASSERT_OK(hier_hooks_register(g_layer.w, &layer_hooks, &g_layer));
    assert_ptr_equal(hier_hooks_arg(g_layer.w, &layer_hooks), &g_layer);
    assert_null(hier_hooks_arg(g_layer.w, &other_hooks));
    assert_null(hier_hooks_arg(NULL, &layer_hooks));
    PX_ASSERT_OK(px_worker_init(g_layer.w));
    assert_int_equal(px_kernel_lookup(g_layer.w, "layer.k", &k), PX_ENOENT);
    atomic_store(&g_sh->layer_runs, 0);
    PX_ASSERT_OK(px_run(g_layer.w, layer_orch, NULL, NULL));
    assert_int_equal(atomic_load(&g_sh->layer_runs), 202);
    PX_ASSERT_OK(px_worker_destroy(g_layer.w));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ctl_all_chips),
        cmocka_unit_test(test_ctl_bad_requests),
        cmocka_unit_test(test_ctl_handler_error),
        cmocka_unit_test(test_service_start_fails),
        cmocka_unit_test(test_ctl_dead_chip),
        cmocka_unit_test(test_ctl_killed_during_call),
        cmocka_unit_test(test_ctl_timeout),
        cmocka_unit_test(test_service_answers_during_kernel),
        cmocka_unit_test(test_fd_passing),
        cmocka_unit_test(test_fd_to_dead_chip),
        cmocka_unit_test(test_layer_registry),
    };

    return cmocka_run_group_tests(tests, ext_setup, ext_teardown);
}
