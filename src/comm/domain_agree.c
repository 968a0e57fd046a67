/*
 * domain_agree.c - the agreement of the hosts on a domain spanning them: before any host
 * makes its part, every host tells the others, through the MPI proxies, the spec (its hash
 * and the fields a person reads: name, chips, window, buffers, signals) and whether it can
 * make its part; after, whether it made it. Every host compares every record with host 0's,
 * so a difference is said alike on every host, naming the field and both hosts' values. A
 * host whose spec fails its own checks still joins (comm_job_refuse): the others hear its
 * reason instead of waiting for it. And the global chip names. (What must agree for the
 * whole job, such as PLEXUS_COMM_TRANSPORT, is compared once at start: job_start.c.)
 */
#include "comm/domain_internal.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comm/proxy.h"
#include "runtime/runtime.h"
#include "util/util.h"

#define COMM_REC_CHIPS 16 /* members shown of a chips list that differs */

/* A buffer of the spec as a record carries it. */
typedef struct comm_rec_buf {
    char name[PX_DOMAIN_NAME_MAX];
    uint64_t bytes;
} comm_rec_buf;

/* What every host says of a domain spanning hosts before (has_spec) and after it makes its
 * part. */
typedef struct comm_job_rec {
    uint32_t magic;
    uint32_t wire_id;
    uint64_t hash;       /* the spec's (comm_spec_hash) */
    int32_t st;          /* PX_OK, or why this host cannot make its part */
    int32_t has_spec;    /* the spec's fields follow */
    int32_t nchips, nsignals, need_peer_ptr, nbuffers;
    uint64_t window_bytes, chips_hash;
    int32_t chips[COMM_REC_CHIPS];
    char name[PX_DOMAIN_NAME_MAX];
    comm_rec_buf buf[PX_DOMAIN_MAX_BUFFERS];
    char msg[400];
} comm_job_rec;

static uint64_t comm_fnv(uint64_t h, const void *ptr, size_t len)
{
    for (const unsigned char *p = ptr; p < (const unsigned char *)ptr + len; p++)
        h = (h ^ *p) * 1099511628211ull;
    return h;
}

/* FNV-1a over the spec's fields that every host must give alike. */
static uint64_t comm_spec_hash(const px_domain_spec *s)
{
    uint64_t h = 1469598103934665603ull;

    h = comm_fnv(h, s->name, strlen(s->name) + 1);
    h = comm_fnv(h, &s->nchips, sizeof(s->nchips));
    h = comm_fnv(h, s->chips, (size_t)s->nchips * sizeof(int));
    h = comm_fnv(h, &s->window_bytes, sizeof(s->window_bytes));
    h = comm_fnv(h, &s->nsignals, sizeof(s->nsignals));
    h = comm_fnv(h, &s->need_peer_ptr, sizeof(s->need_peer_ptr));
    for (int i = 0; i < s->nbuffers; i++) {
        h = comm_fnv(h, s->buffers[i].name, strlen(s->buffers[i].name) + 1);
        h = comm_fnv(h, &s->buffers[i].bytes, sizeof(s->buffers[i].bytes));
    }
    return h;
}

/* The fields of spec s (checked or not: a field that failed its check is left out) into r. */
static void comm_rec_spec(comm_job_rec *r, const px_domain_spec *s)
{
    int nch = s->chips != NULL && s->nchips > 0 && s->nchips <= PX_COMM_MAX_RANKS ? s->nchips : 0;

    r->has_spec = 1;
    if (s->name != NULL)
        snprintf(r->name, sizeof(r->name), "%s", s->name);
    r->nchips = s->nchips;
    r->chips_hash = nch ? comm_fnv(0, s->chips, (size_t)nch * sizeof(int)) : 0;
    for (int i = 0; i < nch && i < COMM_REC_CHIPS; i++)
        r->chips[i] = s->chips[i];
    r->window_bytes = s->window_bytes;
    r->nsignals = s->nsignals;
    r->need_peer_ptr = s->need_peer_ptr;
    r->nbuffers = s->buffers != NULL ? s->nbuffers : 0;
    for (int i = 0; i < r->nbuffers && i < PX_DOMAIN_MAX_BUFFERS; i++) {
        if (s->buffers[i].name != NULL)
            snprintf(r->buf[i].name, sizeof(r->buf[i].name), "%s", s->buffers[i].name);
        r->buf[i].bytes = s->buffers[i].bytes;
    }
}

/* A record's chips, "H:C" each (global chips), "..." past the ones it carries. */
static void comm_rec_chips(const comm_job_rec *r, char *buf, size_t n)
{
    size_t used = 0;

    buf[0] = '\0';
    for (int i = 0; i < r->nchips && i < COMM_REC_CHIPS && used < n; i++) {
        int g = r->chips[i];

        used += (size_t)snprintf(buf + used, n - used, "%s%d:%d", i ? "," : "",
                                 (g & ~PX_CHIP_GLOBAL_BIT) >> 16, g & 0xFFFF);
    }
    if (r->nchips > COMM_REC_CHIPS && used < n)
        snprintf(buf + used, n - used, ",... (%d)", r->nchips);
}

/* Appends one difference ("; " between them) to buf. */
static void comm_rec_add(char *buf, size_t n, size_t *used, const char *fmt, ...)
    PX_PRINTF(4, 5);
static void comm_rec_add(char *buf, size_t n, size_t *used, const char *fmt, ...)
{
    va_list ap;
    int k;

    if (*used >= n)
        return;
    k = snprintf(buf + *used, n - *used, "%s", *used ? "; " : "");
    *used += k > 0 ? (size_t)k : 0;
    if (*used >= n)
        return;
    va_start(ap, fmt);
    k = vsnprintf(buf + *used, n - *used, fmt, ap);
    va_end(ap);
    *used += k > 0 ? (size_t)k : 0;
}

/* The buffers of a and b that differ, into buf. */
static void comm_rec_diff_buffers(const comm_job_rec *a, const comm_job_rec *b, char *buf,
                                  size_t n, size_t *used)
{
    int nb = a->nbuffers < b->nbuffers ? a->nbuffers : b->nbuffers;

    if (a->nbuffers != b->nbuffers)
        comm_rec_add(buf, n, used, "nbuffers %d vs %d", a->nbuffers, b->nbuffers);
    for (int i = 0; i < nb && i < PX_DOMAIN_MAX_BUFFERS; i++) {
        if (strncmp(a->buf[i].name, b->buf[i].name, PX_DOMAIN_NAME_MAX) != 0)
            comm_rec_add(buf, n, used, "buffers[%d] \"%.31s\" vs \"%.31s\"", i, a->buf[i].name,
                         b->buf[i].name);
        else if (a->buf[i].bytes != b->buf[i].bytes)
            comm_rec_add(buf, n, used, "buffer \"%.31s\" bytes %llu vs %llu", a->buf[i].name,
                         (unsigned long long)a->buf[i].bytes,
                         (unsigned long long)b->buf[i].bytes);
    }
}

/* Every field of the specs in a and b that differs, into buf (empty when none is seen). */
static void comm_rec_diff(const comm_job_rec *a, const comm_job_rec *b, char *buf, size_t n)
{
    char ca[COMM_REC_CHIPS * 12 + 24], cb[COMM_REC_CHIPS * 12 + 24];
    size_t used = 0;

    buf[0] = '\0';
    if (strncmp(a->name, b->name, PX_DOMAIN_NAME_MAX) != 0)
        comm_rec_add(buf, n, &used, "name \"%.31s\" vs \"%.31s\"", a->name, b->name);
    if (a->nchips != b->nchips || a->chips_hash != b->chips_hash) {
        comm_rec_chips(a, ca, sizeof(ca));
        comm_rec_chips(b, cb, sizeof(cb));
        comm_rec_add(buf, n, &used, "chips %s (%d) vs %s (%d)", ca, a->nchips, cb, b->nchips);
    }
    if (a->window_bytes != b->window_bytes)
        comm_rec_add(buf, n, &used, "window bytes %llu vs %llu",
                     (unsigned long long)a->window_bytes, (unsigned long long)b->window_bytes);
    comm_rec_diff_buffers(a, b, buf, n, &used);
    if (a->nsignals != b->nsignals)
        comm_rec_add(buf, n, &used, "nsignals %d vs %d", a->nsignals, b->nsignals);
    if (a->need_peer_ptr != b->need_peer_ptr)
        comm_rec_add(buf, n, &used, "need_peer_ptr %d vs %d", a->need_peer_ptr,
                     b->need_peer_ptr);
}

/* Host h's record against host 0's: PX_OK, or PX_EINVAL naming both hosts and what differs
 * (the same words on every host). */
static px_status comm_rec_compare(const comm_job_rec *all, int h)
{
    const comm_job_rec *a = &all[0], *b = &all[h];
    char diff[PX_ERRMSG_MAX / 2];

    if (b->magic != a->magic || b->wire_id != a->wire_id)
        return px_set_error(PX_EINVAL, "host 0 and host %d allocate different domains at this "
                            "point (host 0 its domain spanning hosts number %u, \"%.31s\"; "
                            "host %d number %u, \"%.31s\"): every host allocates the domains "
                            "spanning hosts with the same specs, in the same order", h,
                            a->wire_id & 0x7FFFFFFFu, a->name, h, b->wire_id & 0x7FFFFFFFu,
                            b->name);
    if (b->hash == a->hash)
        return PX_OK;
    if (a->has_spec && b->has_spec)
        comm_rec_diff(a, b, diff, sizeof(diff));
    else
        diff[0] = '\0';
    return px_set_error(PX_EINVAL, "host 0 and host %d give it different specs: %s (host 0's "
                        "first%s%016llx vs %016llx): every host allocates a domain spanning "
                        "hosts with one spec (name, chips, window, buffers, signals), in the "
                        "same order", h, diff[0] ? diff : "spec hashes", diff[0] ? "; hashes "
                        : " ", (unsigned long long)a->hash, (unsigned long long)b->hash);
}

/* The records' verdict: local's failure, else the first host's failure, else the first
 * difference from host 0's record. */
static px_status comm_rec_verdict(const comm_job_rec *all, int hosts, px_status local,
                                  const char *mine)
{
    px_status st = PX_OK;

    if (local != PX_OK)
        return px_set_error(local, "%s", mine); /* this host's own reason first */
    for (int h = 0; h < hosts; h++) {
        const comm_job_rec *r = &all[h];

        if (r->magic == COMM_DOMAIN_MAGIC && r->st != PX_OK)
            return px_set_error(r->st == PX_EPEERDEAD || r->st == PX_ENOMEM ||
                                r->st == PX_ENOTSUP || r->st == PX_EINVAL ? r->st : PX_EIO,
                                "host %d could not make its part (%s): %.*s", h,
                                px_status_name(r->st), (int)sizeof(r->msg), r->msg);
    }
    for (int h = 1; st == PX_OK && h < hosts; h++)
        st = comm_rec_compare(all, h);
    return st;
}

/* One agreement: me allgathered, then the verdict, worded for domain `name`. */
static px_status comm_job_gather(comm_worker *cw, comm_job_rec *me, const char *name,
                                 px_status local)
{
    int hosts = comm_proxy_size(cw->proxy);
    comm_job_rec *all;
    px_status st;
    char mine[PX_ERRMSG_MAX], msg[PX_ERRMSG_MAX];

    snprintf(mine, sizeof(mine), "%s", px_last_error());
    me->magic = COMM_DOMAIN_MAGIC;
    me->st = local;
    if (local != PX_OK) { /* without "px_domain_alloc: domain "x": ": the others say it */
        const char *why = mine, *q;

        if (strncmp(why, "px_domain_alloc: ", 17) == 0)
            why += 17;
        if (strncmp(why, "domain \"", 8) == 0 && (q = strstr(why + 8, "\": ")) != NULL)
            why = q + 3;
        snprintf(me->msg, sizeof(me->msg), "%.399s", why);
    }
    if ((all = calloc((size_t)hosts, sizeof(*all))) == NULL)
        return px_set_error(PX_ENOMEM, "px_domain_alloc: out of host memory");
    st = comm_proxy_allgather(cw->proxy, me, sizeof(*me), all, cw->w->cfg.timeout_s);
    if (st == PX_OK)
        st = comm_rec_verdict(all, hosts, local, mine);
    free(all);
    if (st != PX_OK && local == PX_OK &&
        strncmp(px_last_error(), "px_domain_alloc: ", 17) != 0) { /* (local: as it was) */
        snprintf(msg, sizeof(msg), "%s", px_last_error());
        px_set_error(st, "px_domain_alloc: domain \"%s\": %s", name, msg);
    }
    return st;
}

/*
 * Every host says the same domain before any makes its part, and whether it made it: one
 * allgather through the proxies of (job id, the spec's hash, status). PX_EINVAL naming the
 * first host that differs.
 */
px_status comm_job_sync(comm_worker *cw, px_domain *d, uint64_t hash, px_status local)
{
    comm_job_rec me;

    memset(&me, 0, sizeof(me));
    me.wire_id = d->wire_id;
    me.hash = hash;
    snprintf(me.name, sizeof(me.name), "%s", d->msg.name);
    return comm_job_gather(cw, &me, d->msg.name, local);
}

px_status comm_job_agree(comm_worker *cw, px_domain *d, const px_domain_spec *s,
                         px_status local)
{
    comm_job_rec me;

    d->hash = comm_spec_hash(s);
    memset(&me, 0, sizeof(me));
    me.wire_id = d->wire_id;
    me.hash = d->hash;
    comm_rec_spec(&me, s);
    return comm_job_gather(cw, &me, d->msg.name, local);
}

px_status comm_job_refuse(comm_worker *cw, const px_domain_spec *s, px_status local)
{
    comm_job_rec me;

    if (cw == NULL || cw->proxy == NULL || comm_proxy_size(cw->proxy) < 2 || s == NULL ||
        s->chips == NULL || s->nchips < 1 || s->chips[0] < 0 ||
        !(s->chips[0] & PX_CHIP_GLOBAL_BIT))
        return local; /* not a domain spanning hosts: no other host waits for this one */
    memset(&me, 0, sizeof(me));
    me.wire_id = 0x80000000u | cw->next_job++; /* numbered as on the hosts that made it */
    comm_rec_spec(&me, s); /* (its failure is said before any spec is compared) */
    return comm_job_gather(cw, &me, me.name, local);
}

int px_chip_global(int host, int chip)
{
    if (host < 0 || host >= PX_CHIP_HOSTS_MAX || chip < 0 || chip >= PX_CHIP_HOST_CHIPS)
        return -1;
    return PX_CHIP_GLOBAL_BIT | host << 16 | chip;
}
