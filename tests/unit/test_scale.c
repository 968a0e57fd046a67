/*
 * test_scale.c - starting many core threads (issue 20 item 13).
 *
 *  - A request beyond a limit of the system is refused at once (deadline 0 + slack), before
 *    anything is forked, naming the limit and the numbers: RLIMIT_NPROC lowered in a child
 *    (which first becomes user nobody when it is root, whom the limit does not bind), at
 *    level 3 and at level 2; and, where kernel.pid_max is small enough for 64 chips x 1024
 *    cores to pass it (32768 on many machines), more chips x 1024 cores than it holds.
 *  - Idle cores cost no CPU: 8 chips x 256 cores started and left idle for a second use less
 *    than 0.1 s of CPU together (each idle core spinning and yielding again every 100 ms used
 *    about a CPU here, and made 16 x 1024 take 26 s; idle they use about 0.01 s). This bound
 *    is CPU time, not wall time, and far from both values, so a busy neighbour does not move
 *    it; it is what keeps a start linear in its threads (the spinning idle cores made it
 *    superlinear), whose speed is no unit test's to time.
 */
#include "testutil.h"

#include <dirent.h>
#include <grp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static void ts_config(px_config *c, int level, int chips, int cores)
{
    px_test_config(c, cores);
    c->level = level;
    c->chips = chips;
    c->device_mem = 16ull << 20;
    c->heap_ring = 8ull << 20;
}

static long long ts_read_ll(const char *path)
{
    long long v = -1;
    FILE *f = fopen(path, "re");

    if (f != NULL) {
        if (fscanf(f, "%lld", &v) != 1)
            v = -1;
        fclose(f);
    }
    return v;
}

/* px_worker_create + px_worker_init of cfg must fail with PX_ENOMEM (a level-2 worker starts
 * its cores at create, level 3 its chips at init) at once (deadline 0 + slack: the check
 * comes before any thread or fork), the message holding every word of `words`
 * (NULL-terminated). Returns 0, or a code for the parent. */
static int ts_expect_refused(const px_config *cfg, const char *const *words)
{
    px_worker *w = NULL;
    uint64_t t0 = px_test_now_ns();
    double s;
    px_status st = px_worker_create(cfg, &w);

    if (st == PX_OK && (st = px_worker_init(w)) == PX_OK)
        return 10;
    s = (double)(px_test_now_ns() - t0) * 1e-9;
    fprintf(stderr, "refused in %.3f s: %s: %s\n", s, px_status_name(st), px_last_error());
    if (st != PX_ENOMEM)
        return 11;
    for (int i = 0; words[i] != NULL; i++)
        if (strstr(px_last_error(), words[i]) == NULL) {
            fprintf(stderr, "the message lacks \"%s\"\n", words[i]);
            return 12;
        }
    if (!(s <= px_test_bound_s(0.0))) {
        fprintf(stderr, "refused after %.3f s, past its bound %.3f s\n", s, px_test_bound_s(0.0));
        return 13;
    }
    if (w != NULL)
        px_worker_destroy(w);
    return 0;
}

/* In a child of nobody's (when root) with RLIMIT_NPROC a little above what it runs, 4 chips x
 * 64 cores and a level-2 worker of 256 cores are refused naming the limit. */
static void test_refuses_beyond_nproc(void **state)
{
    pid_t pid;
    int status;

    (void)state;
    fflush(NULL);
    pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        static const char *const words[] = {"RLIMIT_NPROC", "ulimit -u", "cores per", NULL};
        struct rlimit rl = {100, 100};
        px_config c;
        int rc;

        if (geteuid() == 0 && (setgroups(0, NULL) != 0 || setgid(65534) != 0 ||
                               setuid(65534) != 0))
            _exit(77);
        if (setrlimit(RLIMIT_NPROC, &rl) != 0)
            _exit(20);
        ts_config(&c, 3, 4, 64);
        if ((rc = ts_expect_refused(&c, words)) != 0)
            _exit(rc);
        ts_config(&c, 2, 1, 256);
        _exit(ts_expect_refused(&c, words));
    }
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status));
    if (WEXITSTATUS(status) == 77)
        px_test_skip("cannot become user nobody to make RLIMIT_NPROC bind");
    assert_int_equal(WEXITSTATUS(status), 0);
}

/* More chips x 1024 cores than kernel.pid_max holds, where the CLI's ranges reach it. */
static void test_refuses_beyond_pid_max(void **state)
{
    static const char *const words[] = {"kernel.pid_max", "process id", "sysctl", NULL};
    long long pid_max = ts_read_ll("/proc/sys/kernel/pid_max");
    int chips = pid_max > 0 ? (int)(pid_max / 1024) + 1 : 65;
    px_config c;

    (void)state;
    if (chips > 64) {
        printf("kernel.pid_max %lld holds 64 chips x 1024 cores: nothing to refuse here\n",
               pid_max);
        return;
    }
    ts_config(&c, 3, chips, 1024);
    assert_int_equal(ts_expect_refused(&c, words), 0);
}

/* CPU seconds (user + system) of process pid, all its threads; -1 when gone. */
static double ts_cpu_s(int pid)
{
    char path[64], buf[1024], *p;
    unsigned long long ut, st;
    FILE *f;
    size_t n;

    snprintf(path, sizeof(path), "/proc/%d/stat", pid);
    if ((f = fopen(path, "re")) == NULL)
        return -1;
    n = fread(buf, 1, sizeof(buf) - 1, f);
    fclose(f);
    buf[n] = '\0';
    if ((p = strrchr(buf, ')')) == NULL ||
        sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &ut, &st) != 2)
        return -1;
    return (double)(ut + st) / (double)sysconf(_SC_CLK_TCK);
}

/* CPU seconds of this process's children (the chips) together. */
static double ts_children_cpu_s(void)
{
    char path[64], buf[4096];
    double sum = 0;
    FILE *f;
    size_t n;
    char *tok, *save;

    snprintf(path, sizeof(path), "/proc/self/task/%d/children", (int)getpid());
    f = fopen(path, "re");
    assert_non_null(f);
    n = fread(buf, 1, sizeof(buf) - 1, f);
    fclose(f);
    buf[n] = '\0';
    for (tok = strtok_r(buf, " \n", &save); tok != NULL; tok = strtok_r(NULL, " \n", &save)) {
        double s = ts_cpu_s(atoi(tok));

        if (s > 0)
            sum += s;
    }
    return sum;
}

static void test_idle_cores_cost_nothing(void **state)
{
    px_config c;
    px_worker *w;
    double a, b;
    struct timespec one = {1, 0};

    (void)state;
    ts_config(&c, 3, 8, 256);
    PX_ASSERT_OK(px_worker_create(&c, &w));
    PX_ASSERT_OK(px_worker_init(w));
    a = ts_children_cpu_s();
    nanosleep(&one, NULL);
    b = ts_children_cpu_s();
    printf("8 chips x 256 idle cores used %.3f s of CPU in 1 s\n", b - a);
    assert_true(b - a < 0.1 * px_test_slack());
    PX_ASSERT_OK(px_worker_destroy(w));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_refuses_beyond_nproc),
        cmocka_unit_test(test_refuses_beyond_pid_max),
        cmocka_unit_test(test_idle_cores_cost_nothing),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
