/*
 * fdpass.c - file descriptors between the processes of a level-3 worker: memfds passed with
 * SCM_RIGHTS over each chip's socketpair (see ext.h).
 *
 * Transfers go in batches, so that setting up a domain of n chips costs a few control calls
 * to all chips at once rather than a round trip per descriptor. A transfer is messages on the
 * sockets plus one control call of the service route, posted to every chip concerned at
 * once, that tells each chip's service thread what to do with its socket, so it works while
 * the chip's main thread runs a kernel, and a chip's death fails it like any control call
 * (PX_EPEERDEAD):
 *   parent -> chips: the parent sends each chip its list as messages of at most
 *                    HIER_FD_PER_MSG descriptors, each carrying the batch's number and the
 *                    descriptors' tags, then calls "hier.fd_in" {batch} on all of them (in
 *                    groups, so that the descriptors in flight stay within half of
 *                    RLIMIT_NOFILE, which the kernel counts them against); each chip
 *                    receives its messages of that batch into its descriptor table
 *                    (hier_chip_fd_take);
 *   chips -> parent: every chip offered one descriptor under a tag of a family
 *                    (hier_chip_fd_offer); the parent calls "hier.fd_out" {tag, mask} on all
 *                    of them, each sends the one it offered under a matching tag and closes
 *                    its copy, and the parent receives one from each socket.
 * Every message carries its batch or tag; one left behind by a transfer that timed out is
 * recognised and closed by the next receive. The parent makes one transfer at a time
 * (h->fd_lock). SCM_RIGHTS duplicates the descriptor into the receiver, so the sender's stays
 * its own; a descriptor queued to a chip that dies is released with its socket.
 */
#include "hier/hier_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util/clock.h"

#define HIER_FD_MAGIC 0x66647078u /* "xpdf" */
#define HIER_FD_PER_MSG 250       /* descriptors in one message (the kernel takes 253) */
#define HIER_FD_INFLIGHT_MIN 64   /* descriptors sent and not yet taken, at least ... */
#define HIER_FD_INFLIGHT_MAX 65536 /* ... and at most (fd_inflight) */

/* A message's head; a batch message's tags follow it (count of them), one per descriptor. */
typedef struct hier_fd_msg {
    uint64_t tag;        /* chip -> parent: the descriptor's tag; parent -> chip: the batch */
    uint32_t magic;
    int16_t count;       /* descriptors it carries */
    int16_t last;        /* parent -> chip: the batch's last message for this chip */
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

/* Sends head m with m->count descriptors fds and their tags (NULL: none follow the head) on
 * sock, waiting for room until deadline_ns. Returns 0, or -1 with errno. */
static int fd_sendmsg(int sock, const hier_fd_msg *m, const uint64_t *tags, const int *fds,
                      uint64_t deadline_ns)
{
    union {
        char buf[CMSG_SPACE(sizeof(int) * HIER_FD_PER_MSG)];
        struct cmsghdr align;
    } u;
    struct iovec iov[2] = {{.iov_base = (void *)m, .iov_len = sizeof(*m)},
                           {.iov_base = (void *)tags,
                            .iov_len = tags != NULL ? sizeof(*tags) * (size_t)m->count : 0}};
    struct msghdr mh = {.msg_iov = iov, .msg_iovlen = tags != NULL ? 2 : 1};
    size_t len = iov[0].iov_len + iov[1].iov_len;
    ssize_t r;

    if (m->count > 0) {
        struct cmsghdr *c;

        memset(&u, 0, sizeof(u));
        mh.msg_control = u.buf;
        mh.msg_controllen = CMSG_SPACE(sizeof(int) * (size_t)m->count);
        c = CMSG_FIRSTHDR(&mh);
        c->cmsg_level = SOL_SOCKET;
        c->cmsg_type = SCM_RIGHTS;
        c->cmsg_len = CMSG_LEN(sizeof(int) * (size_t)m->count);
        memcpy(CMSG_DATA(c), fds, sizeof(int) * (size_t)m->count);
    }
    for (;;) {
        struct pollfd pf = {.fd = sock, .events = POLLOUT};
        uint64_t now;

        r = sendmsg(sock, &mh, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (r >= 0 || (errno != EINTR && errno != EAGAIN && errno != EWOULDBLOCK))
            break;
        if (errno == EINTR)
            continue;
        if ((now = px_now_ns()) >= deadline_ns) { /* the chip does not read its socket */
            errno = ETIMEDOUT;
            return -1;
        }
        poll(&pf, 1, (int)PX_MIN((deadline_ns - now) / 1000000 + 1, 1000));
    }
    if (r >= 0 && (size_t)r != len) {
        errno = EMSGSIZE;
        return -1;
    }
    return r < 0 ? -1 : 0;
}

/* What fd_recvmsg takes: messages whose head's tag matches want in the bits of mask. */
typedef struct fd_rx {
    uint64_t want, mask;
    hier_fd_msg m;                    /* the head received */
    uint64_t tags[HIER_FD_PER_MSG];   /* its tags (batch messages) */
    int fds[HIER_FD_PER_MSG];         /* its descriptors (m.count of them) */
    int tagged;                       /* batch messages carry tags after the head */
} fd_rx;

/*
 * Receives the next message matching rx from sock, waiting at most until deadline_ns; others
 * (left by a transfer that timed out) are dropped and their descriptors closed. Returns 1
 * with rx->m and rx->fds filled, 0 at the deadline, -1 with errno (EPIPE: the other end is
 * closed).
 */
static int fd_recvmsg(int sock, fd_rx *rx, uint64_t deadline_ns)
{
    for (;;) {
        union {
            char buf[CMSG_SPACE(sizeof(int) * HIER_FD_PER_MSG)];
            struct cmsghdr align;
        } u;
        struct iovec iov[2] = {{.iov_base = &rx->m, .iov_len = sizeof(rx->m)},
                               {.iov_base = rx->tags, .iov_len = sizeof(rx->tags)}};
        struct msghdr mh = {.msg_iov = iov, .msg_iovlen = 2, .msg_control = u.buf,
                            .msg_controllen = sizeof(u.buf)};
        struct cmsghdr *c;
        int got = 0;
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
        for (c = CMSG_FIRSTHDR(&mh); c != NULL; c = CMSG_NXTHDR(&mh, c)) {
            if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS) {
                int k = (int)((c->cmsg_len - CMSG_LEN(0)) / sizeof(int));

                for (int i = 0; i < k; i++) {
                    int f;

                    memcpy(&f, CMSG_DATA(c) + (size_t)i * sizeof(int), sizeof(int));
                    if (got < HIER_FD_PER_MSG)
                        rx->fds[got++] = f;
                    else
                        close(f);
                }
            }
        }
        if ((size_t)r >= sizeof(rx->m) && rx->m.magic == HIER_FD_MAGIC &&
            (rx->m.tag & rx->mask) == (rx->want & rx->mask) && rx->m.count == got &&
            (size_t)r == sizeof(rx->m) + (rx->tagged ? sizeof(uint64_t) * (size_t)got : 0))
            return 1;
        for (int i = 0; i < got; i++)
            close(rx->fds[i]); /* stale: a transfer that gave up */
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

px_status hier_chip_fd_receive(hier_chip *chip, uint64_t batch)
{
    uint64_t deadline = px_now_ns() + (uint64_t)(chip->h->cfg.timeout_s * 1e9);
    fd_rx *rx;
    px_status st = PX_OK;
    int r = 1;

    if ((rx = calloc(1, sizeof(*rx))) == NULL)
        return px_set_error(PX_ENOMEM, "chip %d: out of memory receiving descriptors",
                            chip->index);
    rx->want = batch;
    rx->mask = ~0ull;
    rx->tagged = 1;
    do {
        if ((r = fd_recvmsg(chip->sock, rx, deadline)) <= 0) {
            st = px_set_error(r < 0 ? PX_EIO : PX_ETIMEDOUT, "chip %d: the descriptors of "
                              "batch %llu did not all arrive on its socket (%s)", chip->index,
                              (unsigned long long)rx->want,
                              r < 0 ? strerror(errno) : "none came");
            break;
        }
        /* keep receiving the batch after a failure, so nothing of it stays on the socket */
        for (int i = 0; i < rx->m.count; i++) {
            px_status e = st == PX_OK ? chip_fd_put(chip, rx->tags[i], rx->fds[i], 0)
                                      : PX_ENOMEM;

            if (e != PX_OK) {
                close(rx->fds[i]);
                if (st == PX_OK)
                    st = e;
            }
        }
    } while (!rx->m.last);
    free(rx);
    return st;
}

/* "hier.fd_in" {batch}: receive this chip's messages of the batch the parent just sent. */
static px_status fd_in_cb(hier_chip *chip, void *arg, const void *payload, size_t n,
                          void *reply, size_t *reply_n)
{
    uint64_t batch;

    (void)arg, (void)reply, (void)reply_n;
    if (n != sizeof(batch))
        return px_set_error(PX_EINVAL, "hier.fd_in: payload of %zu bytes, expected a batch "
                            "number", n);
    memcpy(&batch, payload, sizeof(batch));
    return hier_chip_fd_receive(chip, batch);
}

/* "hier.fd_out" {tag, mask}: send the descriptor offered under a tag that matches tag in the
 * bits of mask to the parent. */
static px_status fd_out_cb(hier_chip *chip, void *arg, const void *payload, size_t n,
                           void *reply, size_t *reply_n)
{
    uint64_t tm[2];
    hier_fd_msg m = {.magic = HIER_FD_MAGIC, .count = 1, .last = 1};
    int fd = -1;
    px_status st = PX_OK;

    (void)arg, (void)reply, (void)reply_n;
    if (n != sizeof(tm))
        return px_set_error(PX_EINVAL, "hier.fd_out: payload of %zu bytes, expected a tag and "
                            "a mask", n);
    memcpy(tm, payload, sizeof(tm));
    pthread_mutex_lock(&chip->fd_lock);
    for (int i = 0; i < HIER_CHIP_FDS && fd < 0; i++) {
        if (chip->fds[i].fd >= 0 && chip->fds[i].offered &&
            (chip->fds[i].tag & tm[1]) == (tm[0] & tm[1])) {
            fd = chip->fds[i].fd;
            m.tag = chip->fds[i].tag;
            chip->fds[i].fd = -1;
        }
    }
    pthread_mutex_unlock(&chip->fd_lock);
    if (fd < 0)
        return px_set_error(PX_ENOENT, "chip %d offers no descriptor under tag %llu (offer it "
                            "with hier_chip_fd_offer first)", chip->index,
                            (unsigned long long)tm[0]);
    if (fd_sendmsg(chip->sock, &m, NULL, &fd,
                   px_now_ns() + (uint64_t)(chip->h->cfg.timeout_s * 1e9)) != 0)
        st = px_set_error(PX_EIO, "chip %d: sending the descriptor under tag %llu to the "
                          "parent failed: %s", chip->index, (unsigned long long)m.tag,
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

/* A chip that did not read its socket within the transfer's deadline is silent: it is killed
 * (px_hier_silence), so nothing else waits for it. Returns PX_ETIMEDOUT (message set). */
static px_status fd_send_late(px_hier *h, px_hier_proc *p, const char *what, double timeout_s)
{
    double t = timeout_s > 0 ? timeout_s : h->cfg.timeout_s;
    const char *state = hier_pid_state_name(hier_pid_state(p->pid));
    char why[96];
    int killed;

    snprintf(why, sizeof(why), "it did not read its socket within %g s", t);
    pthread_mutex_lock(&h->lock);
    killed = px_hier_silence(h, p, why);
    pthread_mutex_unlock(&h->lock);
    return px_set_error(PX_ETIMEDOUT, "%s: the chip (%s) did not read its socket within %g s "
                        "(PLEXUS_TIMEOUT_S)%s", what, state, t, killed ? "; plexus killed it "
                        "(SIGKILL), so nothing else waits for it" : "");
}

/* Descriptors a batch may have sent and not yet taken: the kernel counts them against the
 * sender's RLIMIT_NOFILE (ETOOMANYREFS past it), so half of its soft limit. */
static int fd_inflight(void)
{
    struct rlimit rl;
    rlim_t n = getrlimit(RLIMIT_NOFILE, &rl) == 0 ? rl.rlim_cur / 2 : HIER_FD_INFLIGHT_MIN;

    return (int)PX_MAX(PX_MIN(n, (rlim_t)HIER_FD_INFLIGHT_MAX), (rlim_t)HIER_FD_INFLIGHT_MIN);
}

/* The deadline of a transfer's socket work: timeout_s, or the worker's PLEXUS_TIMEOUT_S. */
static uint64_t fd_deadline(const px_hier *h, double timeout_s)
{
    return px_now_ns() + (uint64_t)((timeout_s > 0 ? timeout_s : h->cfg.timeout_s) * 1e9);
}

px_status hier_fd_send_lists_call(px_worker *w, const hier_fd_list *l, int nl,
                                  double timeout_s, int kind, const void *payload, size_t n,
                                  size_t batch_off, hier_call_result *res)
{
    unsigned char *pl = NULL;
    px_status st = PX_OK;
    px_hier *h;
    uint64_t batch, deadline;
    int *chips, budget = fd_inflight();

    for (int i = 0; i < nl; i++) {
        if (fd_proc(w, l[i].chip, "hier_fd_send_lists", &st) == NULL)
            return st;
        for (int k = 0; k < l[i].n; k++) /* a closed one: sendmsg's EBADF says so */
            if (l[i].fds[k] < 0)
                return px_set_error(PX_EINVAL, "hier_fd_send_lists to chip %d: %d is not a "
                                    "descriptor", l[i].chip, l[i].fds[k]);
    }
    if (nl == 0)
        return PX_OK;
    if (payload == NULL ? n != 0 : batch_off + sizeof(batch) > n)
        return px_set_error(PX_EINVAL, "hier_fd_send_lists_call: the batch number does not "
                            "fit the %zu-byte payload at %zu", n, batch_off);
    if ((chips = calloc((size_t)nl, sizeof(*chips))) == NULL ||
        (pl = malloc(payload != NULL ? n : sizeof(batch))) == NULL) {
        free(chips);
        return px_set_error(PX_ENOMEM, "hier_fd_send_lists: out of host memory");
    }
    h = px_hier_of(w);
    pthread_mutex_lock(&h->fd_lock);
    batch = ++h->fd_batch;
    deadline = fd_deadline(h, timeout_s);
    if (payload != NULL) { /* the call's payload, carrying the batch's number */
        memcpy(pl, payload, n);
        memcpy(pl + batch_off, &batch, sizeof(batch));
    } else { /* hier.fd_in {batch} */
        memcpy(pl, &batch, sizeof(batch));
        kind = h->k_fd_in;
        n = sizeof(batch);
    }
    for (int i = 0, g = 0, g0 = 0, inflight = 0; i < nl && st == PX_OK; i++) {
        px_hier_proc *p = &h->procs[l[i].chip];
        int k = 0;

        chips[g++] = l[i].chip;
        inflight += l[i].n;
        do { /* at least one message: the chip waits for the last */
            hier_fd_msg m = {.tag = batch, .magic = HIER_FD_MAGIC,
                             .count = (int16_t)PX_MIN(l[i].n - k, HIER_FD_PER_MSG)};

            m.last = k + m.count == l[i].n;
            if (fd_sendmsg(p->sock, &m, l[i].tags + k, l[i].fds + k, deadline) != 0) {
                int err = errno;
                char what[96];

                snprintf(what, sizeof(what), "passing descriptors to chip %d (pid %d)",
                         p->index, (int)p->pid);
                /* a closed socket is a dead chip: its control call fails once the death
                 * watch has seen how it ended, which names the signal */
                if ((err == EPIPE || err == ECONNRESET) &&
                    hier_call_run(w, h->k_fd_in, &batch, sizeof(batch), &p->index, 1,
                                  timeout_s, NULL) == PX_EPEERDEAD)
                    st = PX_EPEERDEAD;
                else if (err == ETIMEDOUT)
                    st = fd_send_late(h, p, what, timeout_s);
                else
                    st = fd_sock_error(h, p, what, err);
                break;
            }
            k += m.count;
        } while (k < l[i].n);
        /* the chips sent to so far take theirs once the descriptors in flight would pass
         * the budget (fd_inflight), and at the end */
        if (st == PX_OK && (i == nl - 1 || inflight + l[i + 1].n > budget)) {
            st = hier_call_run(w, kind, pl, n, chips, g, timeout_s,
                               res != NULL ? res + g0 : NULL);
            g = 0;
            g0 = i + 1;
            inflight = 0;
        }
    }
    pthread_mutex_unlock(&h->fd_lock);
    free(chips);
    free(pl);
    return st;
}

px_status hier_fd_send_lists(px_worker *w, const hier_fd_list *l, int nl, double timeout_s)
{
    return hier_fd_send_lists_call(w, l, nl, timeout_s, -1, NULL, 0, 0, NULL);
}

px_status hier_fd_fetch_each(px_worker *w, const int *chips, int n, uint64_t tag,
                             uint64_t mask, int *fds, double timeout_s)
{
    uint64_t tm[2] = {tag, mask}, deadline;
    px_status st = PX_OK;
    px_hier *h;
    fd_rx *rx;

    for (int i = 0; i < n; i++) {
        fds[i] = -1;
        if (fd_proc(w, chips[i], "hier_fd_fetch_each", &st) == NULL)
            return st;
    }
    if (n == 0)
        return PX_OK;
    if ((rx = calloc(1, sizeof(*rx))) == NULL)
        return px_set_error(PX_ENOMEM, "hier_fd_fetch_each: out of host memory");
    rx->want = tag;
    rx->mask = mask;
    h = px_hier_of(w);
    pthread_mutex_lock(&h->fd_lock);
    st = hier_call_run(w, h->k_fd_out, tm, sizeof(tm), chips, n, timeout_s, NULL);
    deadline = fd_deadline(h, timeout_s);
    for (int i = 0; i < n && st == PX_OK; i++) {
        px_hier_proc *p = &h->procs[chips[i]];
        char what[96];
        int r;

        snprintf(what, sizeof(what), "fetching a descriptor from chip %d (pid %d)", p->index,
                 (int)p->pid);
        /* each chip sent it before answering: it is on its socket already */
        r = fd_recvmsg(p->sock, rx, deadline);
        if (r < 0)
            st = fd_sock_error(h, p, what, errno);
        else if (r == 0 || rx->m.count != 1)
            st = px_set_error(PX_EIO, "%s: the chip answered but no descriptor under tag "
                              "%llu is on its socket", what, (unsigned long long)tag);
        else
            fds[i] = rx->fds[0];
    }
    pthread_mutex_unlock(&h->fd_lock);
    free(rx);
    if (st != PX_OK)
        for (int i = 0; i < n; i++)
            if (fds[i] >= 0) {
                close(fds[i]);
                fds[i] = -1;
            }
    return st;
}

px_status hier_fd_send(px_worker *w, int chip, uint64_t tag, int fd, double timeout_s)
{
    hier_fd_list l = {.chip = chip, .n = 1, .tags = &tag, .fds = &fd};

    return hier_fd_send_lists(w, &l, 1, timeout_s);
}

px_status hier_fd_fetch(px_worker *w, int chip, uint64_t tag, int *fd, double timeout_s)
{
    if (fd == NULL)
        return px_set_error(PX_EINVAL, "hier_fd_fetch from chip %d: no output", chip);
    return hier_fd_fetch_each(w, &chip, 1, tag, ~0ull, fd, timeout_s);
}
