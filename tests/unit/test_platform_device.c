/*
 * test_platform_device.c - the device contract's calls beyond the arena (platform.h): windows
 * made in one process and imported in another (the handle passed with SCM_RIGHTS, as the
 * level-3 fd passing does), imports refused for a bad handle or where the profile forbids
 * peer access, shared host memory made without a chip, the peer-access query, memset, cores
 * started and joined, and kernels launched and polled.
 */
#include "testutil.h"

#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "platform/platform.h"

#define ARENA (1u << 20)
#define WIN (3 * 4096 + 100) /* not a whole number of pages */

static px_chip *open_chip(const char *profile, int index)
{
    px_config c;
    px_caps caps;
    px_chip *chip = NULL;

    px_test_config(&c, 1);
    snprintf(c.device_profile, sizeof(c.device_profile), "%s", profile);
    PX_ASSERT_OK(px_caps_probe_with(&c, &caps));
    PX_ASSERT_OK(px_plat_chip_open(&caps, index, ARENA, &chip));
    return chip;
}

static void assert_error_has(const char *what)
{
    if (strstr(px_last_error(), what) == NULL)
        print_error("message \"%s\" lacks \"%s\"\n", px_last_error(), what);
    assert_non_null(strstr(px_last_error(), what));
}

/* Sends fd over sock (SCM_RIGHTS). Returns 0, or -1. */
static int send_fd(int sock, int fd)
{
    char byte = 'f';
    struct iovec iov = {.iov_base = &byte, .iov_len = 1};
    union {
        char buf[CMSG_SPACE(sizeof(int))];
        struct cmsghdr align;
    } u;
    struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.buf,
                       .msg_controllen = sizeof(u.buf)};
    struct cmsghdr *c = CMSG_FIRSTHDR(&m);

    memset(u.buf, 0, sizeof(u.buf));
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int));
    memcpy(CMSG_DATA(c), &fd, sizeof(int));
    return sendmsg(sock, &m, 0) == 1 ? 0 : -1;
}

/* Receives a descriptor from sock; returns it, or -1. */
static int recv_fd(int sock)
{
    char byte;
    struct iovec iov = {.iov_base = &byte, .iov_len = 1};
    union {
        char buf[CMSG_SPACE(sizeof(int))];
        struct cmsghdr align;
    } u;
    struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.buf,
                       .msg_controllen = sizeof(u.buf)};
    struct cmsghdr *c;
    int fd = -1;

    if (recvmsg(sock, &m, 0) != 1 || (c = CMSG_FIRSTHDR(&m)) == NULL ||
        c->cmsg_type != SCM_RIGHTS)
        return -1;
    memcpy(&fd, CMSG_DATA(c), sizeof(int));
    return fd;
}

/* Forks a child that runs fn(sock) and exits with its result; returns the child's pid. */
static pid_t fork_child(int (*fn)(int sock), int *parent_sock)
{
    int sv[2];
    pid_t pid;

    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
    pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        close(sv[0]);
        alarm(30); /* a hung child must not hang the test */
        _exit(fn(sv[1]));
    }
    close(sv[1]);
    *parent_sock = sv[0];
    return pid;
}

/* Waits for the child; asserts it exited with 0. */
static void reap(pid_t pid)
{
    int ws = 0;

    assert_int_equal(waitpid(pid, &ws, 0), pid);
    if (!WIFEXITED(ws) || WEXITSTATUS(ws) != 0)
        print_error("child failed: status 0x%x (exit code = the failed step)\n", ws);
    assert_true(WIFEXITED(ws));
    assert_int_equal(WEXITSTATUS(ws), 0);
}

/* The child of test_window_import: chip 1 imports chip 0's window, checks the bytes the
 * parent wrote, writes its own, and answers. Exit codes name the failed step. */
static int window_child(int sock)
{
    px_config cfg;
    px_caps caps;
    px_chip *c = NULL;
    unsigned char *p = NULL;
    char ok = 'k';
    int fd = recv_fd(sock);

    if (fd < 0)
        return 2;
    px_test_config(&cfg, 1);
    if (px_caps_probe_with(&cfg, &caps) != PX_OK || px_plat_chip_open(&caps, 1, ARENA, &c))
        return 3;
    if (px_plat_win_import(c, 0, fd, WIN, (void **)&p) != PX_OK)
        return 4;
    close(fd);
    if (p[0] != 0xa5 || p[WIN - 1] != 0x5a || p[4096] != 0)
        return 5;
    p[1] = 0x11;
    /* the imported window is device memory of chip 1: memset and copies accept it */
    if (px_plat_memset(c, p + 2, 0x22, 10) != PX_OK)
        return 6;
    if (px_plat_win_free(c, p, WIN) != PX_OK)
        return 7;
    px_plat_chip_close(c);
    return write(sock, &ok, 1) == 1 ? 0 : 8;
}

/* A window made in one process (chip 0) and imported in another (chip 1) is one memory: the
 * importer sees what the exporter wrote and the other way round. The handle is a memfd of
 * mode 0600 named after the chip and pid, never in /dev/shm; the memory starts as zeros. */
static void test_window_import(void **state)
{
    px_chip *c = open_chip("default", 0);
    unsigned char *p = NULL;
    char link[64], target[128], want[64], ack = 0;
    struct stat sb;
    ssize_t n;
    int fd = -1, sock;
    pid_t pid = fork_child(window_child, &sock);

    (void)state;
    PX_ASSERT_OK(px_plat_win_create(c, WIN, (void **)&p, &fd));
    assert_true(fd >= 0);
    assert_int_equal(fstat(fd, &sb), 0);
    assert_int_equal(sb.st_mode & 0777, 0600);
    assert_true(fcntl(fd, F_GETFD) & FD_CLOEXEC);
    snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
    n = readlink(link, target, sizeof(target) - 1);
    assert_true(n > 0);
    target[n] = '\0';
    snprintf(want, sizeof(want), "/memfd:plexus-window-chip0-pid%d", (int)getpid());
    assert_true(strncmp(target, want, strlen(want)) == 0);
    for (size_t i = 0; i < WIN; i++)
        assert_int_equal(p[i], 0);
    p[0] = 0xa5;
    p[WIN - 1] = 0x5a;
    assert_int_equal(send_fd(sock, fd), 0);
    close(fd);
    assert_int_equal(read(sock, &ack, 1), 1);
    reap(pid);
    assert_int_equal(p[1], 0x11);
    assert_int_equal(p[2], 0x22);
    assert_int_equal(p[11], 0x22);
    assert_int_equal(p[12], 0);
    assert_int_equal(px_test_shm_plexus_entries(), 0);
    PX_ASSERT_OK(px_plat_win_free(c, p, WIN));
    close(sock);
    px_plat_chip_close(c);
}

/* Importing a handle that is no memory object, or one smaller than asked, is PX_EINVAL with
 * what was wrong; freeing an address that is no window is PX_EINVAL. */
static void test_import_bad_handle(void **state)
{
    px_chip *c = open_chip("default", 0);
    void *p = NULL, *w = NULL;
    int pipefd[2], fd = -1;

    (void)state;
    assert_int_equal(px_plat_win_import(c, 1, -1, WIN, &p), PX_EINVAL);
    assert_error_has("not an open descriptor");
    assert_int_equal(px_plat_win_import(c, 1, 1000000, WIN, &p), PX_EINVAL);
    assert_error_has("not an open descriptor");
    assert_int_equal(pipe(pipefd), 0);
    assert_int_equal(px_plat_win_import(c, 1, pipefd[0], WIN, &p), PX_EINVAL);
    assert_error_has("not a memory object");
    assert_int_equal(px_plat_shm_import(NULL, pipefd[0], 64, &p), PX_EINVAL);
    assert_error_has("not a memory object");
    close(pipefd[0]);
    close(pipefd[1]);
    PX_ASSERT_OK(px_plat_win_create(c, 4096, &w, &fd));
    assert_int_equal(px_plat_win_import(c, 1, fd, 8192, &p), PX_EINVAL);
    assert_error_has("holds 4096 bytes, fewer than the 8192");
    assert_null(p);
    assert_int_equal(px_plat_win_free(c, (char *)w + 4096, 4096), PX_EINVAL);
    assert_error_has("matches no window");
    assert_int_equal(px_plat_win_create(c, 0, &w, &fd), PX_EINVAL);
    close(fd);
    /* a window left mapped is released by the chip's close */
    px_plat_chip_close(c);
}

/* Where the profile forbids peer access the import is refused (PX_ENOTSUP, with the fact),
 * and the query says the same; inside a group of "pairs" it is allowed. */
static void test_peer_access(void **state)
{
    px_chip *pcie = open_chip("a2a3-pcie", 0), *pairs = open_chip("pairs", 0);
    const px_caps *caps = px_plat_caps(pcie);
    char why[256];
    void *w = NULL, *p = NULL;
    int fd = -1;

    (void)state;
    assert_int_equal(px_plat_peer_access(caps, 0, 1, why, sizeof(why)), 0);
    assert_string_equal(why, "peer_map=0 in profile a2a3-pcie");
    assert_int_equal(px_plat_peer_access(caps, 2, 2, why, sizeof(why)), 1);
    assert_int_equal(px_plat_peer_access(caps, 0, 1, NULL, 0), 0);
    PX_ASSERT_OK(px_plat_win_create(pcie, 4096, &w, &fd));
    assert_int_equal(px_plat_win_import(pcie, 1, fd, 4096, &p), PX_ENOTSUP);
    assert_error_has("peer_map=0 in profile a2a3-pcie");
    assert_null(p);
    caps = px_plat_caps(pairs);
    assert_int_equal(px_plat_peer_access(caps, 0, 1, why, sizeof(why)), 1);
    assert_int_equal(px_plat_peer_access(caps, 1, 2, why, sizeof(why)), 0);
    assert_non_null(strstr(why, "peer_map_group=2"));
    PX_ASSERT_OK(px_plat_win_import(pairs, 1, fd, 4096, &p));
    assert_int_equal(px_plat_win_import(pairs, 3, fd, 4096, &w), PX_ENOTSUP);
    PX_ASSERT_OK(px_plat_win_free(pairs, p, 4096));
    close(fd);
    px_plat_chip_close(pairs);
    px_plat_chip_close(pcie);
}

/* The child of test_shm: maps the staging memory it received and writes into it. */
static int shm_child(int sock)
{
    unsigned char *p = NULL;
    char ok = 'k';
    int fd = recv_fd(sock);

    if (fd < 0)
        return 2;
    if (px_plat_shm_import(NULL, fd, 8192, (void **)&p) != PX_OK)
        return 3;
    close(fd);
    if (p[8191] != 0)
        return 4;
    p[8191] = 0x77;
    if (px_plat_shm_free(NULL, p, 8192) != PX_OK)
        return 5;
    return write(sock, &ok, 1) == 1 ? 0 : 6;
}

/* Shared host memory is made without a chip and without a mapping (as the level-3 parent
 * makes staging memory for two chips), named after its purpose and pid; two processes that
 * map it see one memory. */
static void test_shm(void **state)
{
    unsigned char *p = NULL;
    char link[64], target[128], want[64], ack = 0;
    ssize_t n;
    int fd = -1, sock;
    pid_t pid = fork_child(shm_child, &sock);

    (void)state;
    PX_ASSERT_OK(px_plat_shm_create(NULL, "staging", 8192, NULL, &fd));
    snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
    n = readlink(link, target, sizeof(target) - 1);
    assert_true(n > 0);
    target[n] = '\0';
    snprintf(want, sizeof(want), "/memfd:plexus-staging-pid%d", (int)getpid());
    assert_true(strncmp(target, want, strlen(want)) == 0);
    assert_int_equal(send_fd(sock, fd), 0);
    assert_int_equal(read(sock, &ack, 1), 1);
    reap(pid);
    PX_ASSERT_OK(px_plat_shm_import(NULL, fd, 8192, (void **)&p));
    assert_int_equal(p[8191], 0x77);
    PX_ASSERT_OK(px_plat_shm_free(NULL, p, 8192));
    close(fd);
    PX_ASSERT_OK(px_plat_shm_create(NULL, NULL, 100, (void **)&p, &fd));
    p[99] = 1;
    PX_ASSERT_OK(px_plat_shm_free(NULL, p, 100));
    close(fd);
    assert_int_equal(px_plat_shm_create(NULL, "x", 0, NULL, &fd), PX_EINVAL);
    assert_int_equal(px_plat_shm_free(NULL, (char *)p + 1, 100), PX_EINVAL);
    close(sock);
}

/* memset reaches arena bytes and refuses memory that is not the chip's. */
static void test_memset(void **state)
{
    px_chip *c = open_chip("default", 0);
    unsigned char *base = px_plat_dev_base(c), out[64], host[16];

    (void)state;
    PX_ASSERT_OK(px_plat_memset(c, base + 100, 0xee, 64));
    PX_ASSERT_OK(px_plat_copy_d2h(c, out, base + 100, sizeof(out)));
    for (size_t i = 0; i < sizeof(out); i++)
        assert_int_equal(out[i], 0xee);
    assert_int_equal(base[99], 0);
    assert_int_equal(base[164], 0);
    PX_ASSERT_OK(px_plat_memset(c, base + ARENA - 1, 0, 1));
    assert_int_equal(px_plat_memset(c, base + ARENA - 1, 0, 2), PX_EINVAL);
    assert_error_has("memset of 2 bytes");
    assert_int_equal(px_plat_memset(c, host, 0, sizeof(host)), PX_EINVAL);
    px_plat_chip_close(c);
}

/* ---- cores ---- */

#define NCORES 3

typedef struct core_arg {
    _Atomic int *ran;
    _Atomic int *hold;  /* the core waits while this is set */
    pthread_t self;
    int index;
} core_arg;

static void core_main(void *arg)
{
    core_arg *a = arg;

    a->self = pthread_self();
    while (atomic_load(a->hold))
        usleep(1000);
    atomic_fetch_add(a->ran, 1);
}

/* Cores started run their function on threads of their own; join waits for them. A join
 * whose deadline passes while the core still runs is PX_ETIMEDOUT, and a later join ends it. */
static void test_cores(void **state)
{
    px_chip *c = open_chip("default", 0);
    px_plat_core cores[NCORES];
    core_arg args[NCORES];
    _Atomic int ran = 0, hold = 1;
    struct timespec dl;

    (void)state;
    for (int i = 0; i < NCORES; i++) {
        args[i] = (core_arg){.ran = &ran, .hold = &hold, .index = i};
        PX_ASSERT_OK(px_plat_core_start(i == 0 ? NULL : c, &cores[i], i, i == 1 ? 0 : -1,
                                        core_main, &args[i]));
    }
    clock_gettime(CLOCK_REALTIME, &dl);
    dl.tv_nsec += 20 * 1000 * 1000;
    if (dl.tv_nsec >= 1000000000L) {
        dl.tv_sec++;
        dl.tv_nsec -= 1000000000L;
    }
    assert_int_equal(px_plat_core_join(&cores[0], &dl), PX_ETIMEDOUT);
    assert_int_equal(atomic_load(&ran), 0);
    atomic_store(&hold, 0);
    for (int i = 0; i < NCORES; i++)
        PX_ASSERT_OK(px_plat_core_join(&cores[i], NULL));
    PX_ASSERT_OK(px_plat_core_join(&cores[0], NULL)); /* joined already: nothing to do */
    assert_int_equal(atomic_load(&ran), NCORES);
    for (int i = 0; i < NCORES; i++)
        assert_false(pthread_equal(args[i].self, pthread_self()));
    assert_int_equal(px_plat_core_start(c, &cores[0], 0, -1, NULL, NULL), PX_EINVAL);
    px_plat_chip_close(c);
}

static pthread_t g_kernel_thread;
static int g_kernel_calls;

static px_status kernel_ok(px_core_ctx *ctx, const px_task_args *args)
{
    (void)ctx;
    g_kernel_thread = pthread_self();
    g_kernel_calls += args != NULL ? (int)args->n : 100;
    return PX_OK;
}

static px_status kernel_fails(px_core_ctx *ctx, const px_task_args *args)
{
    (void)ctx;
    (void)args;
    return px_set_error(PX_EIO, "kernel_fails: as asked");
}

/* A launched kernel runs (on sim: on the launching thread, before launch returns), and poll
 * reports it complete with the kernel's own status, its error included. */
static void test_launch_poll(void **state)
{
    px_plat_core core = {0};
    px_plat_token tok;
    px_task_args args = {.n = 2};
    px_status st = PX_EINVAL;

    (void)state;
    g_kernel_calls = 0;
    PX_ASSERT_OK(px_plat_launch(&core, kernel_ok, NULL, &args, &tok));
    assert_int_equal(px_plat_poll(&tok, &st), 1);
    assert_int_equal(st, PX_OK);
    assert_int_equal(g_kernel_calls, 2);
    assert_true(pthread_equal(g_kernel_thread, pthread_self()));
    assert_int_equal(px_plat_poll(&tok, &st), 1); /* polling again is allowed */
    PX_ASSERT_OK(px_plat_launch(&core, kernel_fails, NULL, &args, &tok));
    assert_int_equal(px_plat_poll(&tok, &st), 1);
    assert_int_equal(st, PX_EIO);
    assert_error_has("kernel_fails: as asked");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_window_import),
        cmocka_unit_test(test_import_bad_handle),
        cmocka_unit_test(test_peer_access),
        cmocka_unit_test(test_shm),
        cmocka_unit_test(test_memset),
        cmocka_unit_test(test_cores),
        cmocka_unit_test(test_launch_poll),
    };

    unsetenv("PLEXUS_DEVICE_PROFILE");
    unsetenv("PLEXUS_HUGEPAGES");
    return cmocka_run_group_tests(tests, NULL, NULL);
}
