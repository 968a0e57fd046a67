/*
 * test_file.c - the one atomic file writer and the one JSON string escaper (src/util/file.c).
 *
 * Checks: a write replaces the file whole, with mode 0644 (umask permitting), and leaves no
 * temporary behind; symbolic links planted at the old fixed temporary name (NAME.tmp) and at
 * names of the temporary's pattern are never followed (their targets stay untouched), and a
 * link at the final name is replaced by a regular file, its target untouched; a write that
 * fails with ENOSPC half-way (the PX_TEST_ENOSPC hook) returns PX_EIO naming the file and the
 * error, keeps the old file (or none) and removes the temporary; many threads replacing one
 * file leave it whole; the escaper's one rule.
 */
#include "testutil.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util/file.h"

/* Reads path whole into buf (n bytes, NUL-terminated); returns its length or -1. */
static ssize_t read_all(const char *path, char *buf, size_t n)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    ssize_t len;

    if (fd < 0)
        return -1;
    len = read(fd, buf, n - 1);
    close(fd);
    if (len >= 0)
        buf[len] = '\0';
    return len;
}

/* Counts the entries of dir whose name starts with '.' (other than . and ..). */
static int count_hidden(const char *dir)
{
    DIR *d = opendir(dir);
    struct dirent *e;
    int n = 0;

    assert_non_null(d);
    while ((e = readdir(d)) != NULL)
        if (e->d_name[0] == '.' && strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0)
            n++;
    closedir(d);
    return n;
}

static void write_text(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");

    assert_non_null(f);
    fputs(text, f);
    assert_int_equal(fclose(f), 0);
}

/* A write creates the file with the bytes given, mode 0644 under umask 022, no temporary left. */
static void test_replace_whole(void **state)
{
    char dir[256], path[300], buf[64];
    struct stat sb;
    mode_t old = umask(022);

    (void)state;
    px_test_mkdtemp(dir, sizeof(dir), "pxfile");
    snprintf(path, sizeof(path), "%s/out.json", dir);
    PX_ASSERT_OK(util_file_replace(path, "{\"a\": 1}\n", 9, "test"));
    assert_int_equal(read_all(path, buf, sizeof(buf)), 9);
    assert_string_equal(buf, "{\"a\": 1}\n");
    assert_int_equal(lstat(path, &sb), 0);
    assert_true(S_ISREG(sb.st_mode));
    assert_int_equal(sb.st_mode & 0777, 0644);
    PX_ASSERT_OK(util_file_replace(path, "x", 1, "test"));
    assert_int_equal(read_all(path, buf, sizeof(buf)), 1);
    PX_ASSERT_OK(util_file_replace(path, NULL, 0, "test")); /* an empty file is allowed */
    assert_int_equal(read_all(path, buf, sizeof(buf)), 0);
    assert_int_equal(count_hidden(dir), 0);
    umask(old);
    px_test_rmtree(dir);
}

/*
 * Links planted at NAME.tmp (the fixed name the old writer used), at .NAME.tmp and at
 * .NAME.<pid>.tmp are not followed: their targets keep their bytes. A link at the final name
 * is replaced by the new regular file; its target keeps its bytes too.
 */
static void test_links_not_followed(void **state)
{
    char dir[256], path[300], target[300], target2[300], link[400], buf[64];
    const char *patterns[] = {"%s/out.json.tmp", "%s/.out.json.tmp", "%s/.out.json.%d.tmp"};
    struct stat sb;

    (void)state;
    px_test_mkdtemp(dir, sizeof(dir), "pxfile");
    snprintf(path, sizeof(path), "%s/out.json", dir);
    snprintf(target, sizeof(target), "%s/precious", dir);
    snprintf(target2, sizeof(target2), "%s/precious2", dir);
    write_text(target, "precious");
    write_text(target2, "precious2");
    for (size_t i = 0; i < sizeof(patterns) / sizeof(patterns[0]); i++) {
        snprintf(link, sizeof(link), patterns[i], dir, (int)getpid());
        assert_int_equal(symlink(target, link), 0);
    }
    assert_int_equal(symlink(target2, path), 0);
    PX_ASSERT_OK(util_file_replace(path, "new", 3, "test"));
    assert_int_equal(read_all(target, buf, sizeof(buf)), 8);
    assert_string_equal(buf, "precious");
    assert_int_equal(read_all(target2, buf, sizeof(buf)), 9);
    assert_string_equal(buf, "precious2");
    assert_int_equal(lstat(path, &sb), 0);
    assert_true(S_ISREG(sb.st_mode));
    assert_int_equal(read_all(path, buf, sizeof(buf)), 3);
    assert_string_equal(buf, "new");
    px_test_rmtree(dir);
}

/*
 * A full disk half-way through (PX_TEST_ENOSPC=NAME): PX_EIO naming the file and the error;
 * the old file keeps its bytes, a new name gets no file at all, no temporary remains.
 */
static void test_enospc_leaves_nothing(void **state)
{
    char dir[256], path[300], fresh[300], buf[64];

    (void)state;
    px_test_mkdtemp(dir, sizeof(dir), "pxfile");
    snprintf(path, sizeof(path), "%s/dfx.json", dir);
    snprintf(fresh, sizeof(fresh), "%s/trace.json", dir);
    PX_ASSERT_OK(util_file_replace(path, "old", 3, "test"));
    setenv("PX_TEST_ENOSPC", "dfx.json", 1);
    assert_int_equal(util_file_replace(path, "0123456789", 10, "test"), PX_EIO);
    assert_non_null(strstr(px_last_error(), "dfx.json"));
    assert_non_null(strstr(px_last_error(), strerror(ENOSPC)));
    PX_ASSERT_OK(util_file_replace(fresh, "ok", 2, "test")); /* another name is unaffected */
    setenv("PX_TEST_ENOSPC", "*", 1);
    unlink(fresh);
    assert_int_equal(util_file_replace(fresh, "0123456789", 10, "test"), PX_EIO);
    unsetenv("PX_TEST_ENOSPC");
    assert_int_equal(read_all(path, buf, sizeof(buf)), 3);
    assert_string_equal(buf, "old");
    assert_int_equal(access(fresh, F_OK), -1);
    assert_int_equal(count_hidden(dir), 0);
    px_test_rmtree(dir);
}

/* A directory that does not exist, and a path that is too long, are errors with messages. */
static void test_bad_paths(void **state)
{
    char longpath[5000];

    (void)state;
    assert_int_equal(util_file_replace("/nonexistent-dir-px/x.json", "a", 1, "test"), PX_EIO);
    assert_non_null(strstr(px_last_error(), "/nonexistent-dir-px"));
    memset(longpath, 'a', sizeof(longpath) - 1);
    longpath[sizeof(longpath) - 1] = '\0';
    assert_int_equal(util_file_replace(longpath, "a", 1, "test"), PX_EINVAL);
    assert_int_equal(util_file_replace(NULL, "a", 1, "test"), PX_EINVAL);
}

typedef struct writer_arg {
    const char *path;
    char fill;
    int ok;
} writer_arg;

static void *writer_main(void *p)
{
    writer_arg *a = p;
    char data[1 << 16];

    memset(data, a->fill, sizeof(data));
    a->ok = 1;
    for (int i = 0; i < 50; i++)
        if (util_file_replace(a->path, data, sizeof(data), "test") != PX_OK)
            a->ok = 0;
    return NULL;
}

/* Four threads replacing one file 50 times each all succeed; the file is one writer's whole. */
static void test_concurrent_replace(void **state)
{
    char dir[256], path[300];
    static char buf[1 << 17];
    writer_arg a[4];
    pthread_t t[4];
    ssize_t len;

    (void)state;
    px_test_mkdtemp(dir, sizeof(dir), "pxfile");
    snprintf(path, sizeof(path), "%s/trace.json", dir);
    for (int i = 0; i < 4; i++) {
        a[i] = (writer_arg){path, (char)('a' + i), 0};
        assert_int_equal(pthread_create(&t[i], NULL, writer_main, &a[i]), 0);
    }
    for (int i = 0; i < 4; i++) {
        pthread_join(t[i], NULL);
        assert_true(a[i].ok);
    }
    len = read_all(path, buf, sizeof(buf));
    assert_int_equal(len, 1 << 16);
    for (ssize_t i = 1; i < len; i++)
        assert_int_equal(buf[i], buf[0]);
    assert_int_equal(count_hidden(dir), 0);
    px_test_rmtree(dir);
}

static void put_str(void *ctx, const char *p, size_t n)
{
    strncat(ctx, p, n);
}

/* The escaper's one rule (file.h), and its byte limit. */
static void test_json_escape(void **state)
{
    char out[256] = "";

    (void)state;
    util_json_escape("a\"b\\c\nd\re\tf\x01<>&\x7f\xc3\xa9", SIZE_MAX, put_str, out);
    assert_string_equal(out, "\"a\\\"b\\\\c\\nd\\re\\tf\\u0001\\u003c\\u003e\\u0026\\u007f"
                             "\xc3\xa9\"");
    out[0] = '\0';
    util_json_escape("abcdef", 3, put_str, out);
    assert_string_equal(out, "\"abc\"");
    out[0] = '\0';
    util_json_escape(NULL, SIZE_MAX, put_str, out);
    assert_string_equal(out, "\"\"");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_replace_whole),
        cmocka_unit_test(test_links_not_followed),
        cmocka_unit_test(test_enospc_leaves_nothing),
        cmocka_unit_test(test_bad_paths),
        cmocka_unit_test(test_concurrent_replace),
        cmocka_unit_test(test_json_escape),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
