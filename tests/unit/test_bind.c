/*
 * test_bind.c - thread placement (PLEXUS_BIND).
 *
 * With PLEXUS_BIND=cores core i runs on exactly one CPU, the i-th (modulo their number) of
 * those the process may use when the worker is created, and the orchestration, for the
 * length of px_run (its own mask back afterwards), on the next one when the process has more
 * CPUs than cores, else on core 0's. With none (the default) every thread keeps the process's
 * mask. A process restricted to one CPU binds everything there. The knob takes "none" or
 * "cores" and nothing else.
 */
#include "testutil.h"

#include <dirent.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define BIND_CORES 3   /* more cores than a 2-CPU machine has: slots wrap */
#define BIND_TASKS 64

static cpu_set_t g_seen[BIND_CORES]; /* the mask each core index ran its tasks under */
static _Atomic int g_ran[BIND_CORES];
static _Atomic int g_mixed;          /* a core index seen under two different masks */
static cpu_set_t g_orch_mask;

static void bind_mask(cpu_set_t *m)
{
    CPU_ZERO(m);
    assert_int_equal(pthread_getaffinity_np(pthread_self(), sizeof(*m), m), 0);
}

/* Records the calling core's mask, then holds the core ~200 us so the others take tasks. */
static px_status bind_kernel(px_core_ctx *ctx, const px_task_args *a)
{
    int i = px_core_index(ctx);
    uint64_t t0 = px_test_now_ns();
    cpu_set_t m;

    (void)a;
    CPU_ZERO(&m);
    pthread_getaffinity_np(pthread_self(), sizeof(m), &m);
    if (i >= 0 && i < BIND_CORES) {
        if (atomic_fetch_add(&g_ran[i], 1) == 0)
            g_seen[i] = m;
        else if (!CPU_EQUAL(&g_seen[i], &m))
            atomic_store(&g_mixed, 1);
    }
    while (px_test_now_ns() - t0 < 200000)
        ;
    return PX_OK;
}

static px_status bind_orch(px_orch *o, const px_task_args *args, void *user)
{
    px_kernel_id k = *(px_kernel_id *)user;
    px_status st = PX_OK;

    (void)args;
    bind_mask(&g_orch_mask);
    for (int t = 0; t < BIND_TASKS && st == PX_OK; t++) {
        px_task_args a;

        px_args_init(&a);
        st = px_submit(o, k, &a, NULL);
    }
    return st;
}

/* The n-th CPU of m (n counted modulo the CPUs in m). */
static int bind_nth(const cpu_set_t *m, int n)
{
    int k = n % CPU_COUNT(m);

    for (int cpu = 0; cpu < CPU_SETSIZE; cpu++)
        if (CPU_ISSET(cpu, m) && k-- == 0)
            return cpu;
    return -1;
}

/* Runs BIND_TASKS tasks on a `cores`-core worker with PLEXUS_BIND=`bind`. */
static void bind_run_cores(const char *bind, int cores)
{
    px_config cfg;
    px_worker *w;
    px_kernel_id k;

    memset(g_seen, 0, sizeof(g_seen));
    for (int i = 0; i < BIND_CORES; i++)
        atomic_store(&g_ran[i], 0);
    atomic_store(&g_mixed, 0);
    px_test_config(&cfg, cores);
    PX_ASSERT_OK(px_config_set(&cfg, "PLEXUS_BIND", bind));
    PX_ASSERT_OK(px_worker_create(&cfg, &w));
    PX_ASSERT_OK(px_kernel_register(w, "bind.probe", bind_kernel, NULL, &k));
    PX_ASSERT_OK(px_run(w, bind_orch, NULL, &k));
    PX_ASSERT_OK(px_worker_destroy(w));
    assert_int_equal(atomic_load(&g_mixed), 0);
}

static void bind_run(const char *bind)
{
    bind_run_cores(bind, BIND_CORES);
}

/* cores: each core index on its one CPU, the orchestration on core 0's (as many cores as
 * CPUs or more), then unbound again. */
static void test_bind_cores(void **state)
{
    cpu_set_t before, after;
    int seen = 0, n;

    (void)state;
    bind_mask(&before);
    n = CPU_COUNT(&before);
    bind_run_cores("cores", BIND_CORES > n ? BIND_CORES : n);
    bind_mask(&after);
    assert_true(CPU_EQUAL(&before, &after));
    assert_int_equal(CPU_COUNT(&g_orch_mask), 1);
    assert_true(CPU_ISSET(bind_nth(&before, 0), &g_orch_mask));
    for (int i = 0; i < BIND_CORES; i++) {
        if (atomic_load(&g_ran[i]) == 0)
            continue;
        seen++;
        assert_int_equal(CPU_COUNT(&g_seen[i]), 1);
        if (!CPU_ISSET(bind_nth(&before, i), &g_seen[i]))
            fail_msg("core %d ran outside CPU %d", i, bind_nth(&before, i));
    }
    assert_true(seen >= 1);
}

/* One core on a process with more CPUs: the orchestration on the CPU after core 0's. */
static void test_bind_orchestration_own_cpu(void **state)
{
    cpu_set_t before;

    (void)state;
    bind_mask(&before);
    if (CPU_COUNT(&before) < 2) {
        print_message("one CPU only: the orchestration shares it (test_bind_restricted)\n");
        return;
    }
    bind_run_cores("cores", 1);
    assert_int_equal(atomic_load(&g_ran[0]), BIND_TASKS);
    assert_int_equal(CPU_COUNT(&g_seen[0]), 1);
    assert_true(CPU_ISSET(bind_nth(&before, 0), &g_seen[0]));
    assert_int_equal(CPU_COUNT(&g_orch_mask), 1);
    assert_true(CPU_ISSET(bind_nth(&before, 1), &g_orch_mask));
}

static cpu_set_t g_drain_mask;
static _Atomic int g_drain_found;

/* Finds this process's DFX drain thread by name and reads its mask. */
static px_status drain_probe_kernel(px_core_ctx *ctx, const px_task_args *a)
{
    DIR *dir = opendir("/proc/self/task");
    struct dirent *e;

    (void)ctx;
    (void)a;
    while (dir != NULL && (e = readdir(dir)) != NULL) {
        char path[300], comm[32] = "";
        FILE *f;

        snprintf(path, sizeof(path), "/proc/self/task/%s/comm", e->d_name);
        if ((f = fopen(path, "r")) == NULL)
            continue;
        if (fgets(comm, sizeof(comm), f) != NULL && strncmp(comm, "px-dfx-drain", 12) == 0) {
            CPU_ZERO(&g_drain_mask);
            if (sched_getaffinity(atoi(e->d_name), sizeof(g_drain_mask), &g_drain_mask) == 0)
                atomic_store(&g_drain_found, 1);
        }
        fclose(f);
    }
    if (dir != NULL)
        closedir(dir);
    return PX_OK;
}

static px_status drain_orch(px_orch *o, const px_task_args *args, void *user)
{
    px_task_args a;

    (void)args;
    px_args_init(&a);
    return px_submit(o, *(px_kernel_id *)user, &a, NULL);
}

/* DFX on: the drain is bound too, to the last core's CPU when no CPU is left over for it
 * (one core on two CPUs: the core's, not the orchestration's), else to a CPU of its own. */
static void test_bind_dfx_drain(void **state)
{
    char dir[256];
    cpu_set_t before;
    px_config cfg;
    px_worker *w;
    px_kernel_id k;
    int n;

    (void)state;
    bind_mask(&before);
    n = CPU_COUNT(&before);
    px_test_mkdtemp(dir, sizeof(dir), "px_test_bind");
    atomic_store(&g_drain_found, 0);
    px_test_config(&cfg, 1);
    PX_ASSERT_OK(px_config_set(&cfg, "PLEXUS_BIND", "cores"));
    PX_ASSERT_OK(px_config_set(&cfg, "PLEXUS_DFX", "swimlane"));
    PX_ASSERT_OK(px_config_set(&cfg, "PLEXUS_DFX_OUT", dir));
    PX_ASSERT_OK(px_worker_create(&cfg, &w));
    PX_ASSERT_OK(px_kernel_register(w, "bind.drain", drain_probe_kernel, NULL, &k));
    PX_ASSERT_OK(px_run(w, drain_orch, NULL, &k));
    PX_ASSERT_OK(px_worker_destroy(w));
    px_test_rmtree(dir);
    assert_int_equal(atomic_load(&g_drain_found), 1);
    assert_int_equal(CPU_COUNT(&g_drain_mask), 1);
    assert_true(CPU_ISSET(bind_nth(&before, n > 2 ? 2 : 0), &g_drain_mask));
}

/* none (the default): every thread keeps the process's mask. */
static void test_bind_none(void **state)
{
    cpu_set_t before;

    (void)state;
    bind_mask(&before);
    bind_run("none");
    assert_true(CPU_EQUAL(&before, &g_orch_mask));
    for (int i = 0; i < BIND_CORES; i++)
        if (atomic_load(&g_ran[i]) > 0)
            assert_true(CPU_EQUAL(&before, &g_seen[i]));
}

/* A process held to its last CPU: every core and the orchestration there. */
static void test_bind_restricted(void **state)
{
    cpu_set_t before, one;
    int last = -1;

    (void)state;
    bind_mask(&before);
    for (int cpu = 0; cpu < CPU_SETSIZE; cpu++)
        if (CPU_ISSET(cpu, &before))
            last = cpu;
    CPU_ZERO(&one);
    CPU_SET(last, &one);
    assert_int_equal(pthread_setaffinity_np(pthread_self(), sizeof(one), &one), 0);
    bind_run("cores");
    assert_int_equal(pthread_setaffinity_np(pthread_self(), sizeof(before), &before), 0);
    assert_true(CPU_EQUAL(&g_orch_mask, &one));
    for (int i = 0; i < BIND_CORES; i++)
        if (atomic_load(&g_ran[i]) > 0)
            assert_true(CPU_EQUAL(&g_seen[i], &one));
}

/* The knob takes none or cores; anything else is refused with the accepted forms. */
static void test_bind_knob(void **state)
{
    static const char *const bad[] = {"", "core", "CORES", "1", "cores ", "yes"};
    px_config c;

    (void)state;
    unsetenv("PLEXUS_BIND"); /* the default itself, whatever the caller's environment says */
    PX_ASSERT_OK(px_config_default(&c));
    assert_int_equal(c.bind, 0);
    PX_ASSERT_OK(px_config_set(&c, "PLEXUS_BIND", "cores"));
    assert_int_equal(c.bind, 1);
    PX_ASSERT_OK(px_config_set(&c, "PLEXUS_BIND", "none"));
    assert_int_equal(c.bind, 0);
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        assert_int_equal(px_config_set(&c, "PLEXUS_BIND", bad[i]), PX_EINVAL);
        assert_non_null(strstr(px_last_error(), "none or cores"));
    }
    c.bind = 2;
    assert_int_equal(px_config_validate(&c), PX_EINVAL);
    assert_non_null(strstr(px_last_error(), "PLEXUS_BIND"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bind_cores),
        cmocka_unit_test(test_bind_orchestration_own_cpu),
        cmocka_unit_test(test_bind_dfx_drain),
        cmocka_unit_test(test_bind_none),
        cmocka_unit_test(test_bind_restricted),
        cmocka_unit_test(test_bind_knob),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
