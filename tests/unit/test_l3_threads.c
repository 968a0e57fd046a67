/*
 * test_l3_threads.c - level 3 from a process that already runs threads (issue 34).
 *
 * The process starts 4 threads that stay busy in malloc/free and stdio (snprintf; fprintf to
 * a FILE on /dev/null that all of them share and to one of each's own; fflush; fopen/fclose),
 * and, when OpenBLAS (its pthreads build) can be dlopened, one thread that runs dgemm in a
 * loop on 2 OpenBLAS threads and checks every product. Then, 20 times in a row, it makes a
 * level-3 worker that runs the multi_chip example and another that runs the allreduce
 * example (2 chips each), through the example table as `plexus run` does, so every fork
 * happens while those threads keep malloc's arenas, FILE locks and the BLAS pool busy.
 * Checks: each run's own check; the BLAS thread keeps going with right products and gets its
 * 2 threads back after every init; nothing is left behind (no child process, no plexus entry
 * in /dev/shm, the descriptors and threads of before). Without OpenBLAS the BLAS part is left
 * out, and the test prints that and why; everything else still runs.
 * Then: with the dgemm loop running and the bound of the wait for an idle pool cut to 1 ms
 * (PX_TEST_BLAS_IDLE_MS), px_worker_init refuses naming OpenBLAS and gives its threads back;
 * and GNU OpenMP loaded beside another thread is refused naming libgomp (left out, saying so,
 * where libgomp cannot be loaded; last, as it leaves libgomp loaded).
 * Multi-process: ctest runs it under RESOURCE_LOCK "chips" (tests/system/l3.cmake).
 */
#include "testutil.h"

#include <dirent.h>
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "examples.h"

#define LT_ROUNDS 20
#define LT_CHURNERS 4
#define LT_N 192       /* dgemm edge: above OpenBLAS's threshold for threading */
#define LT_WAIT_S 20.0 /* bound of every wait for a thread */

static _Atomic int g_stop;
static FILE *g_null; /* shared by the churners */
static _Atomic uint64_t g_churns;

/* ---- the busy threads ---- */

/* malloc/free of sizes up to 64 KiB, snprintf, fprintf to the shared and an own FILE, now and
 * then fflush and a fopen/fclose, until g_stop. */
static void *churn_thread(void *arg)
{
    unsigned seed = (unsigned)(uintptr_t)arg;
    FILE *own = fopen("/dev/null", "w");
    char line[256];

    while (!atomic_load(&g_stop)) {
        size_t n = 16 + (size_t)(rand_r(&seed) % 65536);
        char *p = malloc(n);

        if (p != NULL)
            p[0] = p[n - 1] = 1;
        snprintf(line, sizeof(line), "churn %u: %zu bytes at %p", seed, n, (void *)p);
        fprintf(g_null, "%s\n", line);
        if (own != NULL)
            fprintf(own, "%s\n", line);
        if ((seed & 63) == 0) {
            FILE *f = fopen("/dev/null", "w");

            fflush(g_null);
            if (f != NULL) {
                fputs(line, f);
                fclose(f);
            }
        }
        free(p);
        atomic_fetch_add(&g_churns, 1);
    }
    if (own != NULL)
        fclose(own);
    return NULL;
}

/* OpenBLAS, when found: cblas_dgemm and its thread count. */
typedef void (*lt_dgemm_fn)(int, int, int, int, int, int, double, const double *, int,
                            const double *, int, double, double *, int);
static struct {
    void *dl;
    lt_dgemm_fn dgemm;
    int (*get)(void);
    void (*set)(int);
    char why[512]; /* why the BLAS part is left out */
    _Atomic uint64_t products;
    _Atomic int bad;
    _Atomic int done;
} g_blas;

/* dgemm of ones (n x n) by B (b[k][j] = j + 1) in a loop; every product is checked. */
static void *blas_thread(void *arg)
{
    double *a = malloc(sizeof(double) * LT_N * LT_N), *b = malloc(sizeof(double) * LT_N * LT_N);
    double *c = malloc(sizeof(double) * LT_N * LT_N);

    (void)arg;
    for (int i = 0; a != NULL && b != NULL && i < LT_N * LT_N; i++) {
        a[i] = 1.0;
        b[i] = (double)(i % LT_N + 1);
    }
    while (a != NULL && b != NULL && c != NULL && !atomic_load(&g_stop)) {
        memset(c, 0, sizeof(double) * LT_N * LT_N);
        g_blas.dgemm(101 /* row major */, 111, 111 /* no transpose */, LT_N, LT_N, LT_N, 1.0,
                     a, LT_N, b, LT_N, 0.0, c, LT_N);
        for (int j = 0; j < LT_N; j += 37)
            if (c[j] != (double)LT_N * (j + 1) ||
                c[(LT_N - 1) * LT_N + j] != (double)LT_N * (j + 1))
                atomic_store(&g_blas.bad, 1);
        atomic_fetch_add(&g_blas.products, 1);
    }
    if (a == NULL || b == NULL || c == NULL)
        atomic_store(&g_blas.bad, 1);
    free(a);
    free(b);
    free(c);
    atomic_store(&g_blas.done, 1);
    return NULL;
}

/* dlopens OpenBLAS's pthreads build; 0 with g_blas filled, or -1 with g_blas.why. */
static int blas_open(void)
{
    static const char *const names[] = {
        "libopenblas.so.0", "libopenblasp-r0.so",
        "/usr/lib/x86_64-linux-gnu/openblas-pthread/libopenblas.so.0",
        "/usr/lib/aarch64-linux-gnu/openblas-pthread/libopenblas.so.0"};
    int (*par)(void);
    size_t len = 0;

    /* a pool worker sleeps after 2^26 idle TSC ticks (about 25 ms) instead of 2^28 (about
     * 0.1 s), so that 40 inits, each waiting for the pool to sleep, fit the test's time; the
     * Python tests run numpy's OpenBLAS with its default */
    setenv("OPENBLAS_THREAD_TIMEOUT", "26", 0);
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]) && g_blas.dl == NULL; i++) {
        g_blas.dl = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
        if (g_blas.dl == NULL)
            len += (size_t)snprintf(g_blas.why + len, len < sizeof(g_blas.why)
                                                          ? sizeof(g_blas.why) - len : 0,
                                    "%s%s", len ? "; " : "", dlerror());
    }
    if (g_blas.dl == NULL)
        return -1;
    g_blas.dgemm = (lt_dgemm_fn)dlsym(g_blas.dl, "cblas_dgemm");
    g_blas.get = (int (*)(void))dlsym(g_blas.dl, "openblas_get_num_threads");
    g_blas.set = (void (*)(int))dlsym(g_blas.dl, "openblas_set_num_threads");
    par = (int (*)(void))dlsym(g_blas.dl, "openblas_get_parallel");
    if (g_blas.dgemm == NULL || g_blas.get == NULL || g_blas.set == NULL || par == NULL) {
        snprintf(g_blas.why, sizeof(g_blas.why), "the library found has no cblas_dgemm / "
                 "openblas_{get,set}_num_threads / openblas_get_parallel");
        return -1;
    }
    if (par() != 1) {
        snprintf(g_blas.why, sizeof(g_blas.why), "the OpenBLAS found is not its pthreads build "
                 "(openblas_get_parallel() = %d)", par());
        return -1;
    }
    g_blas.set(2);
    if (g_blas.get() != 2) {
        snprintf(g_blas.why, sizeof(g_blas.why), "OpenBLAS would not run 2 threads "
                 "(openblas_get_num_threads() = %d after setting 2)", g_blas.get());
        return -1;
    }
    return 0;
}

/* This process's threads (/proc/self/status). */
static int lt_threads(void)
{
    char line[256];
    int n = -1;
    FILE *f = fopen("/proc/self/status", "r");

    assert_non_null(f);
    while (fgets(line, sizeof(line), f) != NULL)
        if (sscanf(line, "Threads: %d", &n) == 1)
            break;
    fclose(f);
    return n;
}

/* Runs example name on 2 chips of 1 core; asserts its check passed. */
static void lt_run(const char *name)
{
    const px_example *ex = px_example_find(name);
    px_example_opts o = {.size = 1000, .iters = 1};
    px_example_result r;
    px_config c;
    px_status st;

    assert_non_null(ex);
    px_test_config(&c, 1);
    c.level = 3;
    c.chips = 2;
    st = px_example_exec(ex, &c, &o, &r);
    if (st != PX_OK)
        print_error("%s: %s\n", name, px_last_error());
    assert_int_equal(st, PX_OK);
    if (!r.check_ok)
        print_error("%s: %s\n", name, r.check);
    assert_true(r.check_ok);
}

/* Waits until *counter passes `from`, bounded; 0 or -1. */
static int lt_progress(_Atomic uint64_t *counter, uint64_t from)
{
    uint64_t deadline = px_test_deadline_ns(LT_WAIT_S);

    while (atomic_load(counter) <= from) {
        if (px_test_now_ns() > deadline)
            return -1;
        usleep(1000);
    }
    return 0;
}

/* The level-3 runs, LT_ROUNDS times, while the threads above stay busy; see the file comment. */
static void test_l3_in_busy_process(void **state)
{
    pthread_t churn[LT_CHURNERS], blas;
    int have_blas = blas_open() == 0, shm0, fds0, threads0;
    uint64_t c0, p0 = 0;

#if defined(__SANITIZE_ADDRESS__)
    /* GCC 12's libasan takes no lock of its allocator around fork (no fork interceptor): a
     * chip may find one held by a churner and hang in its first malloc. Not plexus's to fix. */
    print_message("test_l3_threads: the busy-process rounds are left out under "
                  "AddressSanitizer: its allocator has no fork handler here\n");
    skip();
#endif

    if (!have_blas)
        print_message("test_l3_threads: the OpenBLAS part is left out (no dgemm thread): "
                      "OpenBLAS's pthreads build was not found: %s\n", g_blas.why);
    g_null = fopen("/dev/null", "w");
    assert_non_null(g_null);
    shm0 = px_test_shm_plexus_entries();
    fds0 = px_test_open_fds();
    threads0 = lt_threads(); /* with OpenBLAS: its pool is there already */
    atomic_store(&g_stop, 0);
    for (int i = 0; i < LT_CHURNERS; i++)
        assert_int_equal(pthread_create(&churn[i], NULL, churn_thread,
                                        (void *)(uintptr_t)(i + 1)), 0);
    if (have_blas) {
        assert_int_equal(pthread_create(&blas, NULL, blas_thread, NULL), 0);
        assert_int_equal(lt_progress(&g_blas.products, 0), 0); /* running before the first fork */
    }
    c0 = atomic_load(&g_churns);
    for (int round = 0; round < LT_ROUNDS; round++) {
        lt_run("multi_chip");
        lt_run("allreduce");
        if (have_blas)
            assert_int_equal(g_blas.get(), 2); /* given back after the init */
    }
    /* everyone still moves: nothing stayed locked in the parent either */
    assert_int_equal(lt_progress(&g_churns, atomic_load(&g_churns)), 0);
    assert_true(atomic_load(&g_churns) > c0);
    if (have_blas) {
        p0 = atomic_load(&g_blas.products);
        assert_int_equal(lt_progress(&g_blas.products, p0), 0);
        assert_int_equal(atomic_load(&g_blas.bad), 0);
    }
    atomic_store(&g_stop, 1);
    for (int i = 0; i < LT_CHURNERS; i++)
        pthread_join(churn[i], NULL);
    if (have_blas) {
        assert_int_equal(px_test_wait_flag(&g_blas.done, LT_WAIT_S), 0);
        pthread_join(blas, NULL);
        print_message("test_l3_threads: %d rounds beside 4 busy threads and a dgemm loop on 2 "
                      "OpenBLAS threads (%llu products, all right)\n", LT_ROUNDS,
                      (unsigned long long)atomic_load(&g_blas.products));
    }
    assert_int_equal(px_test_children(), 0);
    assert_int_equal(px_test_shm_plexus_entries(), shm0);
    assert_int_equal(px_test_open_fds(), fds0);
    assert_int_equal(lt_threads(), threads0);
    fclose(g_null);
}

/* With the dgemm loop running and the idle wait's bound cut to 1 ms (PX_TEST_BLAS_IDLE_MS),
 * px_worker_init refuses with PX_ESTATE naming OpenBLAS and what to do, forks nothing, and
 * gives OpenBLAS its 2 threads back. Left out, saying so, without OpenBLAS. */
static void test_blas_busy_refused(void **state)
{
    px_config c;
    px_worker *w;
    pthread_t blas;

    if (g_blas.dl == NULL || g_blas.why[0] != '\0') {
        print_message("test_l3_threads: the busy-pool refusal is left out: %s\n", g_blas.why);
        return;
    }
    atomic_store(&g_stop, 0);
    atomic_store(&g_blas.done, 0);
    assert_int_equal(pthread_create(&blas, NULL, blas_thread, NULL), 0);
    assert_int_equal(lt_progress(&g_blas.products, atomic_load(&g_blas.products)), 0);
    px_test_config(&c, 1);
    c.level = 3;
    c.chips = 2;
    PX_ASSERT_OK(px_worker_create(&c, &w));
    setenv("PX_TEST_BLAS_IDLE_MS", "1", 1);
    assert_int_equal(px_worker_init(w), PX_ESTATE);
    unsetenv("PX_TEST_BLAS_IDLE_MS");
    print_message("test_l3_threads: refused: %s\n", px_last_error());
    assert_non_null(strstr(px_last_error(), "OpenBLAS ("));
    assert_non_null(strstr(px_last_error(), "pool threads busy"));
    assert_non_null(strstr(px_last_error(), "before BLAS work starts in other threads"));
    assert_int_equal(px_test_children(), 0);
    assert_int_equal(g_blas.get(), 2);
    PX_ASSERT_OK(px_worker_destroy(w));
    atomic_store(&g_stop, 1);
    assert_int_equal(px_test_wait_flag(&g_blas.done, LT_WAIT_S), 0);
    pthread_join(blas, NULL);
    assert_int_equal(atomic_load(&g_blas.bad), 0);
}

static void *idle_thread(void *arg)
{
    px_test_wait_flag(arg, LT_WAIT_S);
    return NULL;
}

/* GNU OpenMP loaded while another thread runs: px_worker_init refuses with PX_ESTATE naming
 * libgomp and what to do, and forks nothing. */
static void test_gomp_refused(void **state)
{
    void *gomp = dlopen("libgomp.so.1", RTLD_NOW | RTLD_LOCAL);
    _Atomic int go = 0;
    px_config c;
    px_worker *w;
    pthread_t t;

    if (gomp == NULL) {
        print_message("test_l3_threads: the GNU OpenMP refusal is left out: %s\n", dlerror());
        return;
    }
    px_test_config(&c, 1);
    c.level = 3;
    c.chips = 2;
    PX_ASSERT_OK(px_worker_create(&c, &w));
    assert_int_equal(pthread_create(&t, NULL, idle_thread, &go), 0);
    assert_int_equal(px_worker_init(w), PX_ESTATE);
    print_message("test_l3_threads: refused: %s\n", px_last_error());
    assert_non_null(strstr(px_last_error(), "GNU OpenMP"));
    assert_non_null(strstr(px_last_error(), "libgomp.so.1"));
    assert_non_null(strstr(px_last_error(), "before the program's first OpenMP parallel region"));
    assert_int_equal(px_test_children(), 0);
    atomic_store(&go, 1);
    pthread_join(t, NULL);
    PX_ASSERT_OK(px_worker_destroy(w));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_l3_in_busy_process),
        cmocka_unit_test(test_blas_busy_refused),
        cmocka_unit_test(test_gomp_refused),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
