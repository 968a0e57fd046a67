/*
 * file.c - the atomic file writer and the JSON string escaper every output shares (file.h).
 */
#include "util/file.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "util/log.h"

#define UTIL_PATH_MAX 4096
#define UTIL_TMP_TRIES 16

/* A random 64-bit value for a temporary's name (getrandom, else the clock and a counter). */
static uint64_t util_file_nonce(void)
{
    static _Atomic uint64_t counter;
    struct timespec ts;
    uint64_t v;

    if (getrandom(&v, sizeof(v), GRND_NONBLOCK) == (ssize_t)sizeof(v))
        return v;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    v = (uint64_t)ts.tv_nsec * 0x9e3779b97f4a7c15ull ^ (uint64_t)ts.tv_sec;
    return v ^ (counter++ * 0xff51afd7ed558ccdull);
}

/* Splits path at its last '/': dir gets "." when there is none. Returns 0, or -1 if too long. */
static int util_file_split(const char *path, char *dir, size_t n, const char **base)
{
    const char *slash = strrchr(path, '/');
    size_t len;

    if (slash == NULL) {
        *base = path;
        snprintf(dir, n, ".");
        return 0;
    }
    *base = slash + 1;
    len = slash == path ? 1 : (size_t)(slash - path);
    if (len >= n)
        return -1;
    memcpy(dir, path, len);
    dir[len] = '\0';
    return 0;
}

/* Creates a fresh temporary beside path; returns its fd (tmp filled) or -1 with errno. */
static int util_file_mktemp(const char *dir, const char *base, char *tmp, size_t n)
{
    for (int i = 0; i < UTIL_TMP_TRIES; i++) {
        int len = snprintf(tmp, n, "%s/.%s.%d.%016llx.tmp", dir, base, (int)getpid(),
                           (unsigned long long)util_file_nonce());
        int fd;

        if (len < 0 || (size_t)len >= n) {
            errno = ENAMETOOLONG;
            return -1;
        }
        fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
        if (fd >= 0 || errno != EEXIST)
            return fd;
    }
    errno = EEXIST;
    return -1;
}

/* The test hook (file.h): returns how many bytes may be written before ENOSPC, or n. */
static size_t util_file_enospc_at(const char *base, size_t n)
{
    const char *want = getenv("PX_TEST_ENOSPC");

    if (want == NULL || (strcmp(want, "*") != 0 && strcmp(want, base) != 0))
        return n;
    return n / 2;
}

/* Writes all n bytes to fd, then fsyncs. Returns 0 or an errno value. */
static int util_file_write_all(int fd, const char *p, size_t n, const char *base)
{
    size_t limit = util_file_enospc_at(base, n), done = 0;

    while (done < n) {
        size_t want = n - done;
        ssize_t w;

        if (done >= limit)
            return ENOSPC;
        if (done + want > limit)
            want = limit - done;
        w = write(fd, p + done, want);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return w < 0 ? errno : EIO;
        done += (size_t)w;
    }
    if (limit < n)
        return ENOSPC;
    return fsync(fd) != 0 ? errno : 0;
}

px_status util_file_replace(const char *path, const void *data, size_t n, const char *who)
{
    char dir[UTIL_PATH_MAX], tmp[UTIL_PATH_MAX + 64];
    const char *base, *step = "write";
    int fd, err;

    if (path == NULL || (data == NULL && n > 0))
        return px_set_error(PX_EINVAL, "%s: cannot write a file: path or data is NULL", who);
    if (strlen(path) >= UTIL_PATH_MAX || util_file_split(path, dir, sizeof(dir), &base) != 0 ||
        *base == '\0')
        return px_set_error(PX_EINVAL, "%s: cannot write \"%s\": the path is longer than %d "
                            "bytes or names no file; choose a shorter output path", who, path,
                            UTIL_PATH_MAX - 1);
    fd = util_file_mktemp(dir, base, tmp, sizeof(tmp));
    if (fd < 0)
        return px_set_error(PX_EIO, "%s: cannot create a temporary file in %s for %s: %s; check "
                            "that the directory exists and is writable", who, dir, base,
                            strerror(errno));
    err = util_file_write_all(fd, data, n, base);
    if (close(fd) != 0 && err == 0)
        err = errno;
    if (err == 0 && rename(tmp, path) != 0) {
        err = errno;
        step = "rename";
    }
    if (err != 0) {
        (void)unlink(tmp);
        return px_set_error(PX_EIO, "%s: cannot %s %s (%zu bytes): %s; the old file (if any) is "
                            "kept; check the space and permissions of %s", who,
                            step, path, n, strerror(err), dir);
    }
    return PX_OK;
}

px_status util_dir_lock(const char *dir, double timeout_s, const char *who, int *fd)
{
    struct timespec tick = {0, 10 * 1000 * 1000};
    char path[UTIL_PATH_MAX];
    uint64_t waited_ns = 0, limit_ns = (uint64_t)(timeout_s * 1e9);
    int len = snprintf(path, sizeof(path), "%s/.plexus.lock", dir), lfd;

    if (len < 0 || (size_t)len >= sizeof(path))
        return px_set_error(PX_EINVAL, "%s: output directory \"%s\" is longer than %d bytes; "
                            "choose a shorter one", who, dir, UTIL_PATH_MAX - 20);
    lfd = open(path, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (lfd < 0)
        return px_set_error(PX_EIO, "%s: cannot open the output lock %s: %s; check that the "
                            "directory is writable and that the name is not a link", who, path,
                            strerror(errno));
    while (flock(lfd, LOCK_EX | LOCK_NB) != 0) {
        if (errno != EWOULDBLOCK && errno != EINTR) {
            int err = errno;

            close(lfd);
            return px_set_error(PX_EIO, "%s: cannot lock %s: %s", who, path, strerror(err));
        }
        if (waited_ns == 0)
            PX_LOG_INFO("%s: another run is writing into %s; waiting for it (at most %g s, "
                        "PLEXUS_TIMEOUT_S)", who, dir, timeout_s);
        if (waited_ns >= limit_ns) {
            close(lfd);
            return px_set_error(PX_ETIMEDOUT, "%s: another run has held the output directory "
                                "%s for %g s (PLEXUS_TIMEOUT_S); wait for it to end or choose "
                                "another directory with --out DIR or PLEXUS_DFX_OUT", who, dir,
                                timeout_s);
        }
        nanosleep(&tick, NULL);
        waited_ns += (uint64_t)tick.tv_nsec;
    }
    *fd = lfd;
    return PX_OK;
}

void util_dir_unlock(int fd)
{
    if (fd >= 0)
        close(fd); /* closing the last descriptor releases the flock */
}

void util_json_escape(const char *s, size_t max, util_put_cb put, void *ctx)
{
    static const char hex[] = "0123456789abcdef";
    const unsigned char *c = (const unsigned char *)(s ? s : ""), *run = c;
    const unsigned char *end = c + strnlen((const char *)c, max);

    put(ctx, "\"", 1);
    for (; c < end; c++) {
        char e[6] = {'\\', 'u', '0', '0', hex[*c >> 4], hex[*c & 15]};
        size_t elen = 6;

        if (*c >= 0x20 && *c != '"' && *c != '\\' && *c != '<' && *c != '>' && *c != '&' &&
            *c != 0x7f)
            continue;
        if (c > run)
            put(ctx, (const char *)run, (size_t)(c - run)); /* the plain bytes before c */
        run = c + 1;
        if (*c == '"' || *c == '\\' || *c == '\n' || *c == '\r' || *c == '\t') {
            e[1] = *c == '\n' ? 'n' : *c == '\r' ? 'r' : *c == '\t' ? 't' : (char)*c;
            elen = 2;
        }
        put(ctx, e, elen);
    }
    if (c > run)
        put(ctx, (const char *)run, (size_t)(c - run));
    put(ctx, "\"", 1);
}

px_status util_file_read(const char *path, const char *who, char **text, size_t *len)
{
    FILE *f;
    long n;

    *text = NULL;
    *len = 0;
    if ((f = fopen(path, "rb")) == NULL)
        return errno == ENOENT ? PX_ENOENT : px_set_error(PX_EIO, "%s: cannot open %s: %s", who,
                                                          path, strerror(errno));
    if (fseek(f, 0, SEEK_END) != 0 || (n = ftell(f)) < 0 || fseek(f, 0, SEEK_SET) != 0 ||
        (*text = malloc((size_t)n + 1)) == NULL || fread(*text, 1, (size_t)n, f) != (size_t)n) {
        fclose(f);
        free(*text);
        *text = NULL;
        return px_set_error(PX_EIO, "%s: cannot read %s", who, path);
    }
    fclose(f);
    (*text)[n] = '\0';
    *len = (size_t)n;
    return PX_OK;
}
