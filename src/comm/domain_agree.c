/*
 * domain_agree.c - the agreement of the hosts on a domain spanning them: before any host
 * makes its part, every host tells the others, through the MPI proxies, the spec's hash, its
 * PLEXUS_COMM_TRANSPORT and whether it can make its part; and the global chip names.
 */
#include "comm/domain_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comm/proxy.h"
#include "runtime/runtime.h"
#include "util/util.h"

/* What every host says of a domain spanning hosts before it makes its part. */
typedef struct comm_job_rec {
    uint32_t magic;
    uint32_t wire_id;
    uint64_t hash;       /* the spec's (comm_spec_hash) */
    int32_t forced;      /* PLEXUS_COMM_TRANSPORT */
    int32_t st;          /* PX_OK, or why this host cannot make its part */
    char msg[200];
} comm_job_rec;

/* FNV-1a over the spec's fields that every host must give alike. */
static uint64_t comm_spec_hash(const px_domain_spec *s)
{
    uint64_t h = 1469598103934665603ull;
    const unsigned char *p;

#define COMM_HASH(ptr, len)                                                                \
    for (p = (const unsigned char *)(ptr); p < (const unsigned char *)(ptr) + (len); p++) \
        h = (h ^ *p) * 1099511628211ull
    COMM_HASH(s->name, strlen(s->name) + 1);
    COMM_HASH(&s->nchips, sizeof(s->nchips));
    COMM_HASH(s->chips, (size_t)s->nchips * sizeof(int));
    COMM_HASH(&s->window_bytes, sizeof(s->window_bytes));
    COMM_HASH(&s->nsignals, sizeof(s->nsignals));
    COMM_HASH(&s->need_peer_ptr, sizeof(s->need_peer_ptr));
    for (int i = 0; i < s->nbuffers; i++) {
        COMM_HASH(s->buffers[i].name, strlen(s->buffers[i].name) + 1);
        COMM_HASH(&s->buffers[i].bytes, sizeof(s->buffers[i].bytes));
    }
#undef COMM_HASH
    return h;
}

/*
 * Every host says the same domain, under the same rule, before any makes its part: one
 * allgather through the proxies of (job id, the spec's hash, PLEXUS_COMM_TRANSPORT).
 * PX_EINVAL naming the first host that differs.
 */
px_status comm_job_sync(comm_worker *cw, px_domain *d, uint64_t hash, px_status local)
{
    comm_proxy *p = cw->proxy;
    int hosts = comm_proxy_size(p);
    comm_job_rec me = {.magic = COMM_DOMAIN_MAGIC, .wire_id = d->wire_id, .hash = hash,
                       .forced = cw->w->cfg.comm_transport, .st = local}, *all;
    px_status st;
    char mine[PX_ERRMSG_MAX];

    snprintf(mine, sizeof(mine), "%s", px_last_error());
    if (local != PX_OK)
        snprintf(me.msg, sizeof(me.msg), "%.199s", mine);
    if ((all = calloc((size_t)hosts, sizeof(*all))) == NULL)
        return px_set_error(PX_ENOMEM, "px_domain_alloc: out of host memory");
    st = comm_proxy_allgather(p, &me, sizeof(me), all, cw->w->cfg.timeout_s);
    if (st == PX_OK && local != PX_OK) {
        free(all);
        return px_set_error(local, "%s", mine); /* this host's own reason first */
    }
    for (int h = 0; st == PX_OK && h < hosts; h++) {
        const comm_job_rec *r = &all[h];

        if (r->magic == me.magic && r->st != PX_OK)
            st = px_set_error(r->st == PX_EPEERDEAD || r->st == PX_ENOMEM ||
                              r->st == PX_ENOTSUP ? r->st : PX_EIO, "host %d could not make "
                              "its part (%s): %.*s", h, px_status_name(r->st),
                              (int)sizeof(r->msg), r->msg);
        else if (r->magic != me.magic || r->wire_id != me.wire_id || r->hash != me.hash)
            st = px_set_error(PX_EINVAL, "host %d allocates another domain at this point (its "
                              "spanning domain number %u, spec hash %016llx; here %u, "
                              "%016llx): every host allocates the domains spanning hosts with "
                              "the same specs, in the same order", h,
                              r->wire_id & 0x7FFFFFFFu, (unsigned long long)r->hash,
                              me.wire_id & 0x7FFFFFFFu, (unsigned long long)me.hash);
        else if (r->forced != me.forced)
            st = px_set_error(PX_EINVAL, "host %d has PLEXUS_COMM_TRANSPORT=%s, this one %s: "
                              "the hosts must apply one rule (set it alike everywhere, e.g. "
                              "mpirun -x PLEXUS_COMM_TRANSPORT)", h,
                              r->forced == 0 ? "auto" : comm_tl_name(r->forced),
                              me.forced == 0 ? "auto" : comm_tl_name(me.forced));
    }
    free(all);
    if (st != PX_OK) {
        char msg[PX_ERRMSG_MAX];

        snprintf(msg, sizeof(msg), "%s", px_last_error());
        px_set_error(st, "px_domain_alloc: domain \"%s\": %s", d->msg.name, msg);
    }
    return st;
}

px_status comm_job_agree(comm_worker *cw, px_domain *d, const px_domain_spec *s,
                         px_status local)
{
    d->hash = comm_spec_hash(s);
    return comm_job_sync(cw, d, d->hash, local);
}

int px_chip_global(int host, int chip)
{
    if (host < 0 || host >= PX_CHIP_HOSTS_MAX || chip < 0 || chip >= PX_CHIP_HOST_CHIPS)
        return -1;
    return PX_CHIP_GLOBAL_BIT | host << 16 | chip;
}
