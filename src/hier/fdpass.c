/*
 * fdpass.c - file descriptors between the processes of a level-3 worker: memfds passed with
 * SCM_RIGHTS over each chip's socketpair (see ext.h).
 *
 * A transfer is a message on the socket plus a control call of the service route that tells
 * the chip's service thread what to do with the socket, so it works while the chip's main
 * thread runs a kernel, and the chip's death fails it like any control call (PX_EPEERDEAD):
 *   parent -> chip: the parent sends {tag} with the descriptor, then calls "hier.fd_in"
 *                   {tag}; the chip receives it into its descriptor table (hier_chip_fd_take);
 *   chip -> parent: the chip offered the descriptor under a tag (hier_chip_fd_offer); the
 *                   parent calls "hier.fd_out" {tag}, the chip sends it and closes its copy,
 *                   the parent receives it;
 *   chip -> chip:   the parent fetches from one and sends to the other, keeping no copy.
 * Every message carries its tag; a message left behind by a transfer that timed out is
 * recognised by its tag and closed by the next receive. The parent makes one transfer at a
 * time (h->fd_lock). SCM_RIGHTS duplicates the descriptor into the receiver, so the sender's
 * stays its own; a descriptor queued to a chip that dies is released with its socket.
 */
#include "hier/hier_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util/clock.h"

#define HIER_FD_MAGIC 0x66647078u /* "xpdf" */

typedef struct hier_fd_msg {
    uint64_t tag;
    uint32_t magic;
    int32_t has_fd;
} hier_fd_msg;

px_status hier_memfd_create(const char *name, size_t bytes, int *out)
{
    int fd;

    if (name == NULL || out == NULL)
        return px_set_error(PX_EINVAL, "hier_memfd_create: name and output are required");
    fd = memfd_create(name, MFD_CLOEXEC);
    if (fd < 0)
        return px_set_error(PX_ENOMEM, "memfd_create(\"%s\") failed: %s", name,
                            strerror(errno));
    if (fchmod(fd, 0600) != 0 || ftruncate(fd, (off_t)bytes) != 0) {
        px_set_error(PX_ENOMEM, "memory object \"%s\" of %zu bytes: mode 0600 / sizing failed: "
                     "%s", name, bytes, strerror(errno));
        close(fd);
        return PX_ENOMEM;
    }
    *out = fd;
    return PX_OK;
}

/* ---- the socket ---- */

/* Sends {tag} with fd (or none: fd < 0) on sock. Returns 0, or -1 with errno. */
static int fd_sendmsg(int sock, uint64_t tag, int fd)
{
    hier_fd_msg m = {.tag = tag, .magic = HIER_FD_MAGIC, .has_fd = fd >= 0};
    union {
        char buf[CMSG_SPACE(sizeof(int))];
        struct cmsghdr align;
    } u;
    struct iovec iov = {.iov_base = &m, .iov_len = sizeof(m)};
    struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1};
    ssize_t r;

    memset(&u, 0, sizeof(u));
    if (fd >= 0) {
        struct cmsghdr *c;

        mh.msg_control = u.buf;
        mh.msg_controllen = sizeof(u.buf);
        c = CMSG_FIRSTHDR(&mh);
        c->cmsg_level = SOL_SOCKET;
        c->cmsg_type = SCM_RIGHTS;
        c->cmsg_len = CMSG_LEN(sizeof(int));
        memcpy(CMSG_DATA(c), &fd, sizeof(int));
    }
    do
        r = sendmsg(sock, &mh, MSG_NOSIGNAL | MSG_DONTWAIT);
    while (r < 0 && errno == EINTR);
    return r == (ssize_t)sizeof(m) ? 0 : -1;
}

/*
 * Receives the message tagged tag from sock, waiting at most until deadline_ns; messages with
 * other tags (left by a transfer that timed out) are dropped and their descriptors closed.
 * Returns 1 with *fd (-1 when the message carried none), 0 at the deadline, -1 with errno
 * (EPIPE: the other end is closed).
 */
static int fd_recvmsg(int sock, uint64_t tag, uint64_t deadline_ns, int *fd)
{
    for (;;) {
        hier_fd_msg m;
        union {
            char buf[CMSG_SPACE(sizeof(int))];
            struct cmsghdr align;
        } u;
        struct iovec iov = {.iov_base = &m, .iov_len = sizeof(m)};
        struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.buf,
                            .msg_controllen = sizeof(u.buf)};
        struct cmsghdr *c;
        int got = -1;
        ssize_t r = recvmsg(sock, &mh, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);

        if (r == 0) {
            errno = EPIPE;
            return -1;
        }
        if (r < 0) {
            struct pollfd pf = {.fd = sock, .events = POLLIN};
            uint64_t now = px_now_ns();

            if (errno == EINTR)
                continue;
            if (errno != EAGAIN && errno != EWOULDBLOCK)
                return -1;
            if (now >= deadline_ns)
                return 0;
            poll(&pf, 1, (int)PX_MIN((deadline_ns - now) / 1000000 + 1, 1000));
            continue;
        }
        for (c = CMSG_FIRSTHDR(&mh); c != NULL; c = CMSG_NXTHDR(&mh, c))
            if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS &&
                c->cmsg_len >= CMSG_LEN(sizeof(int)))
                memcpy(&got, CMSG_DATA(c), sizeof(int));
        if (r == (ssize_t)sizeof(m) && m.magic == HIER_FD_MAGIC && m.tag == tag) {
            *fd = got;
            return 1;
        }
        if (got >= 0)
            close(got); /* stale: a transfer that gave up */
    }
}

/* ---- the chip's side: handlers and its descriptor table ---- */

/* Puts fd into chip's table under tag (offered: for the parent to fetch). */
static px_status chip_fd_put(hier_chip *chip, uint64_t tag, int fd, int offered)
{
    px_status st = px_set_error(PX_ENOMEM, "chip %d holds %d descriptors already; take or "
                                "offer fewer at once", chip->index, HIER_CHIP_FDS);

    pthread_mutex_lock(&chip->fd_lock);
    for (int i = 0; i < HIER_CHIP_FDS; i++) {
        if (chip->fds[i].fd >= 0 && chip->fds[i].tag == tag &&
            chip->fds[i].offered == offered) {
            st = px_set_error(PX_EINVAL, "chip %d: tag %llu is in use already", chip->index,
                              (unsigned long long)tag);
            break;
        }
    }
    for (int i = 0; st == PX_ENOMEM && i < HIER_CHIP_FDS; i++) {
        if (chip->fds[i].fd < 0) {
            chip->fds[i].fd = fd;
            chip->fds[i].tag = tag;
            chip->fds[i].offered = offered;
            st = PX_OK;
        }
    }
    pthread_mutex_unlock(&chip->fd_lock);
    if (st == PX_OK)
        px_clear_error();
    return st;
}

/* Removes and returns the descriptor under tag (offered or received), or -1. */
static int chip_fd_get(hier_chip *chip, uint64_t tag, int offered)
{
    int fd = -1;

    pthread_mutex_lock(&chip->fd_lock);
    for (int i = 0; i < HIER_CHIP_FDS && fd < 0; i++) {
        if (chip->fds[i].fd >= 0 && chip->fds[i].tag == tag &&
            chip->fds[i].offered == offered) {
            fd = chip->fds[i].fd;
            chip->fds[i].fd = -1;
        }
    }
    pthread_mutex_unlock(&chip->fd_lock);
    return fd;
}

px_status hier_chip_fd_take(hier_chip *chip, uint64_t tag, int *fd)
{
    int f = chip != NULL ? chip_fd_get(chip, tag, 0) : -1;

    if (f < 0)
        return px_set_error(PX_ENOENT, "chip %d received no descriptor under tag %llu",
                            hier_chip_index(chip), (unsigned long long)tag);
    *fd = f;
    return PX_OK;
}

px_status hier_chip_fd_offer(hier_chip *chip, uint64_t tag, int fd)
{
    int d;
    px_status st;

    if (chip == NULL || fd < 0)
        return px_set_error(PX_EINVAL, "hier_chip_fd_offer: a chip and a descriptor are "
                            "required (fd %d)", fd);
    if ((d = fcntl(fd, F_DUPFD_CLOEXEC, 0)) < 0)
        return px_set_error(PX_EINVAL, "chip %d: cannot duplicate descriptor %d to offer it: "
                            "%s", chip->index, fd, strerror(errno));
    if ((st = chip_fd_put(chip, tag, d, 1)) != PX_OK)
        close(d);
    return st;
}

int hier_chip_fd_discard(hier_chip *chip, uint64_t tag, uint64_t mask)
{
    int n = 0;

    if (chip == NULL)
        return 0;
    pthread_mutex_lock(&chip->fd_lock);
    for (int i = 0; i < HIER_CHIP_FDS; i++) {
        if (chip->fds[i].fd >= 0 && (chip->fds[i].tag & mask) == (tag & mask)) {
            close(chip->fds[i].fd);
            chip->fds[i].fd = -1;
            n++;
        }
    }
    pthread_mutex_unlock(&chip->fd_lock);
    return n;
}

/* Reads a payload's tag. */
static px_status fd_tag(const void *payload, size_t n, uint64_t *tag)
{
    if (n != sizeof(*tag))
        return px_set_error(PX_EINVAL, "fd passing: payload of %zu bytes, expected a %zu-byte "
                            "tag", n, sizeof(*tag));
    memcpy(tag, payload, sizeof(*tag));
    return PX_OK;
}

/* "hier.fd_in": receive the descriptor the parent just sent under the payload's tag. */
static px_status fd_in_cb(hier_chip *chip, void *arg, const void *payload, size_t n,
                          void *reply, size_t *reply_n)
{
    uint64_t tag = 0;
    int fd = -1, r;
    px_status st;

    (void)arg, (void)reply, (void)reply_n;
    if ((st = fd_tag(payload, n, &tag)) != PX_OK)
        return st;
    r = fd_recvmsg(chip->sock, tag, px_now_ns() + (uint64_t)(chip->h->cfg.timeout_s * 1e9),
                   &fd);
    if (r <= 0 || fd < 0)
        return px_set_error(r < 0 ? PX_EIO : PX_ETIMEDOUT, "chip %d: no descriptor under tag "
                            "%llu arrived on its socket (%s)", chip->index,
                            (unsigned long long)tag, r < 0 ? strerror(errno) : "none came");
    if ((st = chip_fd_put(chip, tag, fd, 0)) != PX_OK)
        close(fd);
    return st;
}

/* "hier.fd_out": send the descriptor offered under the payload's tag to the parent. */
static px_status fd_out_cb(hier_chip *chip, void *arg, const void *payload, size_t n,
                           void *reply, size_t *reply_n)
{
    uint64_t tag = 0;
    int fd;
    px_status st;

    (void)arg, (void)reply, (void)reply_n;
    if ((st = fd_tag(payload, n, &tag)) != PX_OK)
        return st;
    if ((fd = chip_fd_get(chip, tag, 1)) < 0)
        return px_set_error(PX_ENOENT, "chip %d offers no descriptor under tag %llu (offer it "
                            "with hier_chip_fd_offer first)", chip->index,
                            (unsigned long long)tag);
    if (fd_sendmsg(chip->sock, tag, fd) != 0)
        st = px_set_error(PX_EIO, "chip %d: sending the descriptor under tag %llu to the "
                          "parent failed: %s", chip->index, (unsigned long long)tag,
                          strerror(errno));
    close(fd);
    return st;
}

px_status hier_fd_setup(px_hier *h)
{
    px_status st = hier_ctl_register(h->w, "hier.fd_in", HIER_CTL_SERVICE, fd_in_cb, NULL,
                                     &h->k_fd_in);

    if (st == PX_OK)
        st = hier_ctl_register(h->w, "hier.fd_out", HIER_CTL_SERVICE, fd_out_cb, NULL,
                               &h->k_fd_out);
    return st;
}

/* ---- the parent's side ---- */

/* Checks w and chip; returns the proc, or NULL with the message set (status in *st). */
static px_hier_proc *fd_proc(px_worker *w, int chip, const char *what, px_status *st)
{
    px_hier *h;

    if (w == NULL || w->level != 3 || (h = px_hier_of(w)) == NULL) {
        *st = px_set_error(PX_EINVAL, "%s: not a level-3 worker", what);
        return NULL;
    }
    if (h->state != PX_HIER_INITED) {
        *st = px_set_error(PX_ESTATE, "%s: the worker has no chips; call px_worker_init "
                           "first", what);
        return NULL;
    }
    if (chip < 0 || chip >= h->nchips) {
        *st = px_set_error(PX_EINVAL, "%s: chip %d does not exist (chips 0..%d)", what, chip,
                           h->nchips - 1);
        return NULL;
    }
    return &h->procs[chip];
}

/* The status of a socket error talking to p: a closed peer is a dead chip. */
static px_status fd_sock_error(px_hier *h, px_hier_proc *p, const char *what, int err)
{
    char death[PX_HIER_DEATH_MAX];

    pthread_mutex_lock(&h->lock);
    snprintf(death, sizeof(death), "%s", p->dead ? p->death : "");
    pthread_mutex_unlock(&h->lock);
    if (death[0])
        return px_set_error(PX_EPEERDEAD, "%s: %s", what, death);
    if (err == EPIPE || err == ECONNRESET || err == ENOTCONN)
        return px_set_error(PX_EPEERDEAD, "%s: chip %d (pid %d) has closed its end of the "
                            "socket: it died (the death watch will say how)", what, p->index,
                            (int)p->pid);
    return px_set_error(PX_EIO, "%s: socket of chip %d (pid %d): %s", what, p->index,
                        (int)p->pid, strerror(err));
}

/* Sends fd to p under tag and waits until p holds it (fd_lock held). */
static px_status fd_send_locked(px_hier *h, px_hier_proc *p, uint64_t tag, int fd, double t)
{
    char what[96];

    snprintf(what, sizeof(what), "passing a descriptor to chip %d (pid %d)", p->index,
             (int)p->pid);
    if (fd_sendmsg(p->sock, tag, fd) != 0) {
        int err = errno;

        /* a closed socket is a dead chip: its control call fails once the death watch has
         * seen how it ended, which names the signal */
        if ((err == EPIPE || err == ECONNRESET) &&
            hier_call_run(h->w, h->k_fd_in, &tag, sizeof(tag), &p->index, 1, t, NULL) ==
                PX_EPEERDEAD)
            return PX_EPEERDEAD;
        return fd_sock_error(h, p, what, err);
    }
    return hier_call_run(h->w, h->k_fd_in, &tag, sizeof(tag), &p->index, 1, t, NULL);
}

/* Fetches the descriptor p offered under tag (fd_lock held). */
static px_status fd_fetch_locked(px_hier *h, px_hier_proc *p, uint64_t tag, int *fd, double t)
{
    double wait_s = t > 0 ? t : h->cfg.timeout_s;
    px_status st = hier_call_run(h->w, h->k_fd_out, &tag, sizeof(tag), &p->index, 1, t, NULL);
    char what[96];
    int r, got = -1;

    if (st != PX_OK)
        return st;
    snprintf(what, sizeof(what), "fetching a descriptor from chip %d (pid %d)", p->index,
             (int)p->pid);
    /* the chip sent it before answering: it is on the socket already */
    r = fd_recvmsg(p->sock, tag, px_now_ns() + (uint64_t)(wait_s * 1e9), &got);
    if (r < 0)
        return fd_sock_error(h, p, what, errno);
    if (r == 0 || got < 0)
        return px_set_error(PX_EIO, "%s: the chip answered but no descriptor under tag %llu "
                            "is on its socket", what, (unsigned long long)tag);
    *fd = got;
    return PX_OK;
}

px_status hier_fd_send(px_worker *w, int chip, uint64_t tag, int fd, double timeout_s)
{
    px_status st;
    px_hier_proc *p = fd_proc(w, chip, "hier_fd_send", &st);
    px_hier *h;

    if (p == NULL)
        return st;
    if (fd < 0 || fcntl(fd, F_GETFD) < 0)
        return px_set_error(PX_EINVAL, "hier_fd_send to chip %d: %d is not an open descriptor",
                            chip, fd);
    h = px_hier_of(w);
    pthread_mutex_lock(&h->fd_lock);
    st = fd_send_locked(h, p, tag, fd, timeout_s);
    pthread_mutex_unlock(&h->fd_lock);
    return st;
}

px_status hier_fd_fetch(px_worker *w, int chip, uint64_t tag, int *fd, double timeout_s)
{
    px_status st;
    px_hier_proc *p = fd_proc(w, chip, "hier_fd_fetch", &st);
    px_hier *h;

    if (p == NULL)
        return st;
    if (fd == NULL)
        return px_set_error(PX_EINVAL, "hier_fd_fetch from chip %d: no output", chip);
    h = px_hier_of(w);
    pthread_mutex_lock(&h->fd_lock);
    st = fd_fetch_locked(h, p, tag, fd, timeout_s);
    pthread_mutex_unlock(&h->fd_lock);
    return st;
}

px_status hier_fd_relay(px_worker *w, int from, uint64_t from_tag, int to, uint64_t to_tag,
                        double timeout_s)
{
    px_status st;
    px_hier_proc *src = fd_proc(w, from, "hier_fd_relay", &st), *dst;
    px_hier *h;
    int fd = -1;

    if (src == NULL || (dst = fd_proc(w, to, "hier_fd_relay", &st)) == NULL)
        return st;
    h = px_hier_of(w);
    pthread_mutex_lock(&h->fd_lock);
    st = fd_fetch_locked(h, src, from_tag, &fd, timeout_s);
    if (st == PX_OK) {
        st = fd_send_locked(h, dst, to_tag, fd, timeout_s);
        close(fd); /* the parent keeps no copy */
    }
    pthread_mutex_unlock(&h->fd_lock);
    return st;
}
