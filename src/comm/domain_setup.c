/*
 * domain_setup.c - a domain's set-up: the rule applied to every pair (select.c), then the
 * steps on the chips (domain.h): the description and pairs' shared memory in one batch,
 * comm.create, every window fetched at once and sent in one batch, comm.map, the fallback of
 * pairs whose window mapping failed, comm.ready. Each step is one control call (or one batch
 * of descriptors) to all members at once, whatever their count.
 */
#include "comm/domain_internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "comm/proxy.h"
#include "comm/transport/staged.h"
#include "platform/platform.h"
#include "runtime/runtime.h"
#include "util/log.h"
#include "util/util.h"
#include "util/wait.h"

/*
 * Applies the rule (select.c) to every pair of d's ranks: fills d->tl and d->why. PX_ENOTSUP
 * naming the first pair that has no transport, with the reasons and the alternatives.
 */
/* "rank 3 (chip 1 of host 1)" in a domain that spans hosts, else "rank 3 (chip 1)". */
static const char *comm_rank_text(const px_domain *d, int r, char *buf, size_t n)
{
    if (d->hosts != NULL)
        snprintf(buf, n, "rank %d (chip %d of host %d)", r, d->chips[r], d->hosts[r]);
    else
        snprintf(buf, n, "rank %d (chip %d)", r, d->chips[r]);
    return buf;
}

void comm_site_of(const comm_worker *cw, const px_domain *d, int a, int b, comm_site *s)
{
    const comm_proxy *p = cw->proxy;
    int me = p != NULL ? comm_proxy_rank(p) : 0;
    int ha = d->hosts != NULL ? d->hosts[a] : me, hb = d->hosts != NULL ? d->hosts[b] : me;

    *s = (comm_site){.mpi = p != NULL, .no_mpi = cw->mpi_why, .ha = ha, .hb = hb,
                     .ida = p != NULL ? comm_proxy_host(p, ha)->id
                                      : cw->w->caps.f[PX_FACT_HOST_ID].text,
                     .idb = p != NULL ? comm_proxy_host(p, hb)->id
                                      : cw->w->caps.f[PX_FACT_HOST_ID].text};
}

/* The facts the rule reads for a pair of ranks: the probe of their host (the union of the
 * hosts' facts: each host's own, exchanged at the start), this host's for a pair of two. */
static const px_caps *comm_pair_caps(const comm_worker *cw, const px_domain *d, int a, int b)
{
    if (d->hosts == NULL || cw->proxy == NULL || d->hosts[a] != d->hosts[b] ||
        d->hosts[a] == comm_proxy_rank(cw->proxy))
        return &cw->w->caps;
    return &comm_proxy_host(cw->proxy, d->hosts[a])->caps;
}

/*
 * A pair of ranks on two hosts is chosen by its hosts alone (the rule's facts for it are this
 * host's and the site's; no transport of two hosts asks the chips), so the rule runs once per
 * pair of hosts and each of its pairs takes the same choice: a domain of 16 hosts x 64 chips
 * has 523,776 pairs, of which 491,520 cross hosts, and 120 pairs of hosts.
 */
typedef struct comm_host_choice {
    int tl;        /* 0: not chosen yet */
    int why;       /* its reason's index (comm_pair_set keeps it: the last one set) */
} comm_host_choice;

px_status comm_select(px_worker *w, px_domain *d)
{
    int n = d->msg.n, forced = w->cfg.comm_transport, nh = 0;
    char err[640];
    comm_choice ch;
    comm_site site;
    comm_host_choice *hc = NULL;
    px_status st = PX_OK;

    /* the forcing rule's other half: under a forced direct a failed mapping is fatal */
    d->forced_direct = forced == PX_COMM_TL_DIRECT;
    for (int r = 0; d->hosts != NULL && r < n; r++)
        nh = PX_MAX(nh, d->hosts[r] + 1);
    if ((d->why_of = calloc((size_t)n * (size_t)n, sizeof(*d->why_of))) == NULL ||
        (nh > 1 && (hc = calloc((size_t)nh * (size_t)nh, sizeof(*hc))) == NULL)) {
        free(hc);
        return px_set_error(PX_ENOMEM, "px_domain_alloc: out of host memory");
    }
    for (int a = 0; a < n && st == PX_OK; a++) {
        /* its own window: by load and store */
        if ((st = comm_pair_set(d, a, a, comm_tl_self(), "own window")) != PX_OK)
            break;
        for (int b = a + 1; b < n && st == PX_OK; b++) {
            comm_host_choice *h = hc != NULL && d->hosts[a] != d->hosts[b]
                                      ? &hc[d->hosts[a] * nh + d->hosts[b]] : NULL;

            if (h != NULL && h->tl != 0) { /* this pair of hosts was chosen already */
                d->tl[a * n + b] = d->tl[b * n + a] = (uint8_t)h->tl;
                d->why_of[a * n + b] = d->why_of[b * n + a] = (uint16_t)h->why;
                continue;
            }
            comm_site_of(d->cw, d, a, b, &site);
            comm_choose_at(comm_pair_caps(d->cw, d, a, b), &site, forced, d->need_peer_ptr,
                           d->chips[a], d->chips[b], &ch);
            if (ch.tl == PX_COMM_TL_NONE) {
                char ra[64], rb[64];

                st = px_set_error(PX_ENOTSUP, "domain \"%s\": %s -> %s: no transport: %s",
                                  d->msg.name, comm_rank_text(d, a, ra, sizeof(ra)),
                                  comm_rank_text(d, b, rb, sizeof(rb)),
                                  comm_choice_error(&ch, forced, d->need_peer_ptr, err,
                                                    sizeof(err)));
            }
            else if ((st = comm_pair_set(d, a, b, ch.tl, comm_choice_reason(&ch))) == PX_OK &&
                     h != NULL)
                *h = (comm_host_choice){.tl = ch.tl, .why = d->why_of[a * n + b]};
        }
    }
    free(hc);
    return st;
}

/* ---- set-up: the description, descriptors in batches, the fallback ---- */

/* The set-up's state in the parent: the description (mapped) and per-chip descriptor lists. */
typedef struct comm_setup {
    comm_desc *desc;
    int desc_fd;
    int *fds;              /* nmem * n: the descriptors of the batch being sent (-1: none):
                            * a member gets n at most (its peers', or the description, its
                            * staged pairs' and its one mpi ring) */
    uint64_t *tags;        /* nmem * n: their tags */
    hier_fd_list *lists;   /* n */
} comm_setup;

static void comm_setup_fini(comm_setup *su, const px_domain *d)
{
    if (su->desc != NULL)
        (void)px_plat_shm_free(NULL, su->desc, d->msg.desc_bytes);
    if (su->desc_fd >= 0)
        close(su->desc_fd);
    free(su->fds);
    free(su->tags);
    free(su->lists);
}

/* Makes the description of d and the set-up's tables. */
static px_status comm_setup_init(comm_setup *su, const px_domain *d)
{
    int n = d->msg.n;
    void *p;
    px_status st;

    memset(su, 0, sizeof(*su));
    su->desc_fd = -1;
    if ((su->fds = calloc((size_t)d->nmem * (size_t)n, sizeof(*su->fds))) == NULL ||
        (su->tags = calloc((size_t)d->nmem * (size_t)n, sizeof(*su->tags))) == NULL ||
        (su->lists = calloc((size_t)n, sizeof(*su->lists))) == NULL)
        return px_set_error(PX_ENOMEM, "out of host memory for the set-up of %d ranks", n);
    /* host memory the parent and every member map (the platform's) */
    if ((st = px_plat_shm_create(NULL, "domain", d->msg.desc_bytes, &p, &su->desc_fd)) !=
        PX_OK)
        return st;
    su->desc = p;
    su->desc->magic = COMM_DESC_MAGIC;
    su->desc->id = d->id;
    su->desc->n = n;
    for (int r = 0; r < n; r++) /* another host's rank: no chip here (comm_member_remote) */
        comm_desc_chips(su->desc)[r] = d->mpos[r] >= 0 ? d->chips[r]
                                                       : comm_member_remote(d->hosts[r],
                                                                            d->chips[r]);
    memcpy(comm_desc_pairs(su->desc), d->tl, (size_t)n * (size_t)n);
    return PX_OK;
}

/* Starts a batch: every member's list empty (one list per chip of this worker). */
static void comm_batch_begin(comm_setup *su, const px_domain *d)
{
    int n = d->msg.n;

    for (int i = 0; i < d->nmem; i++)
        su->lists[i] = (hier_fd_list){.chip = d->mem[i], .n = 0,
                                      .tags = su->tags + (size_t)i * n,
                                      .fds = su->fds + (size_t)i * n};
}

/* Adds fd under tag to rank r's list of the batch (nothing for another host's rank). */
static void comm_batch_add(comm_setup *su, const px_domain *d, int r, uint64_t tag, int fd)
{
    hier_fd_list *l;
    size_t i;

    if (d->mpos[r] < 0)
        return;
    l = &su->lists[d->mpos[r]];
    i = (size_t)d->mpos[r] * (size_t)d->msg.n + (size_t)l->n++;

    su->tags[i] = tag;
    su->fds[i] = fd;
}

/* Sends the batch to every member with control call kind (d->msg, which carries the batch's
 * number): each member receives its list, then does the call's work; res: their answers. */
static px_status comm_batch_call(comm_worker *cw, comm_setup *su, px_domain *d, int kind,
                                 hier_call_result *res)
{
    px_status st = hier_fd_send_lists_call(cw->w, su->lists, d->nmem, 0, cw->kinds[kind],
                                           &d->msg, sizeof(d->msg),
                                           offsetof(comm_create_msg, batch), res);

    d->msg.batch = 0; /* later calls receive nothing */
    return st;
}

/* Makes the shared memory of pair a < b if its transport asks for some (*fd -1 if not). */
static px_status comm_pair_memory(const px_domain *d, int a, int b, int *fd)
{
    const px_comm_tl *t = comm_tl_of(d->tl[a * d->msg.n + b]);
    size_t bytes = t->prepare != NULL ? t->prepare(d->msg.n) : 0;
    *fd = -1;
    if (bytes == 0)
        return PX_OK;
    return px_plat_shm_create(NULL, t->name, bytes, NULL, fd);
}

/* A per_rank transport's memory of member r (mpi: its one ring to the proxy), made, mapped
 * here (the proxy serves it) and added to r's list the first time one of r's pairs takes
 * the transport; its descriptor goes into pfd[*np] to be closed after the send. */
static px_status comm_batch_ring(comm_setup *su, px_domain *d, const px_comm_tl *t, int r,
                                 int *pfd, int *np)
{
    int n = d->msg.n, fd = -1;
    size_t bytes = t->prepare(n);
    px_status st;

    if (d->mpos[r] < 0 || (d->pmem != NULL && d->pmem[r] != NULL))
        return PX_OK; /* another host's rank (its own worker makes it), or made already */
    if (d->pmem == NULL && (d->pmem = calloc((size_t)n, sizeof(void *))) == NULL)
        return px_set_error(PX_ENOMEM, "out of host memory");
    if ((st = px_plat_shm_create(NULL, t->name, bytes, NULL, &fd)) != PX_OK)
        return st;
    pfd[(*np)++] = fd;
    if ((st = px_plat_shm_import(NULL, fd, bytes, &d->pmem[r])) != PX_OK)
        return st;
    d->pmem_bytes = bytes; /* every member's the same: comm_proxied_drop unmaps them */
    comm_batch_add(su, d, r, comm_ring_tag(d->id, r), fd);
    return PX_OK;
}

/* Adds the shared memory of pair a < b to both members' lists (a per_rank transport's: each
 * member's own, once); the descriptors go into pfd[*np...], closed after the send. */
static px_status comm_batch_pair(comm_setup *su, px_domain *d, int a, int b, int *pfd, int *np)
{
    const px_comm_tl *t = comm_tl_of(d->tl[a * d->msg.n + b]);
    px_status st;
    int fd;

    if (t->per_rank && t->prepare != NULL && t->prepare(d->msg.n) > 0) {
        if ((st = comm_batch_ring(su, d, t, a, pfd, np)) != PX_OK)
            return st;
        return comm_batch_ring(su, d, t, b, pfd, np);
    }
    st = comm_pair_memory(d, a, b, &fd);
    pfd[(*np)++] = fd;
    if (st == PX_OK && fd >= 0) {
        comm_batch_add(su, d, a, comm_pair_tag(d->id, a, b), fd);
        comm_batch_add(su, d, b, comm_pair_tag(d->id, a, b), fd);
    }
    return st;
}

/* Closes the shared memory descriptors a batch sent (the chips hold their own now). */
static void comm_batch_close(int *pair_fds, int npair)
{
    for (int i = 0; i < npair; i++)
        if (pair_fds[i] >= 0)
            close(pair_fds[i]);
}

/* comm.create, with the description and the shared memory of every member's pairs in its
 * batch. */
static px_status comm_create(comm_worker *cw, comm_setup *su, px_domain *d)
{
    /* each member: its pairs (n - 1) and its ring, so nmem * n descriptors at most */
    int n = d->msg.n, np = 0, *pfd = calloc((size_t)d->nmem * (size_t)n + 1, sizeof(int));
    px_status st = pfd != NULL ? PX_OK : px_set_error(PX_ENOMEM, "out of host memory");

    comm_batch_begin(su, d);
    for (int r = 0; st == PX_OK && r < n; r++)
        comm_batch_add(su, d, r, comm_desc_tag(d->id), su->desc_fd);
    for (int a = 0; st == PX_OK && a < n; a++)
        for (int b = a + 1; st == PX_OK && b < n; b++)
            if (d->mpos[a] >= 0 || d->mpos[b] >= 0) /* each host makes its pairs' memory */
                st = comm_batch_pair(su, d, a, b, pfd, &np);
    if (st == PX_OK)
        st = comm_batch_call(cw, su, d, COMM_KIND_CREATE, NULL);
    if (pfd != NULL)
        comm_batch_close(pfd, np);
    free(pfd);
    return st;
}

/* After comm.create: fetches every member's window at once, then comm.map with the windows
 * of each member's peers whose transport maps them in its batch; res: the answers. */
static px_status comm_map(comm_worker *cw, comm_setup *su, px_domain *d,
                          hier_call_result *res)
{
    int n = d->msg.n, m = d->nmem, *win = calloc((size_t)m, sizeof(int));
    px_status st = win != NULL ? PX_OK : px_set_error(PX_ENOMEM, "out of host memory");

    for (int i = 0; win != NULL && i < m; i++)
        win[i] = -1;

    /* each member of this worker offers one window: its own, under comm_fd_tag(id, rank) */
    if (st == PX_OK && n > 1)
        st = hier_fd_fetch_each(cw->w, d->mem, m, comm_fd_tag(d->id, 0), ~0xFFFFull, win, 0);
    /* the MPI proxy carries requests out against the members' windows: mapped here */
    if (st == PX_OK && n > 1 && d->pmem != NULL) {
        size_t wb = px_comm_window_bytes(n, d->msg.nsig, d->msg.data_bytes);

        if ((d->hwin = calloc((size_t)n, sizeof(void *))) == NULL)
            st = px_set_error(PX_ENOMEM, "out of host memory");
        for (int i = 0; st == PX_OK && i < m; i++)
            st = px_plat_win_host_map(win[i], wb, &d->hwin[d->mrank[i]]);
    }
    comm_batch_begin(su, d);
    for (int r = 0; st == PX_OK && r < n; r++)
        for (int q = 0; q < n; q++)
            if (q != r && d->mpos[q] >= 0 && comm_tl_of(d->tl[r * n + q])->maps_window)
                comm_batch_add(su, d, r, comm_fd_tag(d->id, q), win[d->mpos[q]]);
    if (st == PX_OK)
        st = comm_batch_call(cw, su, d, COMM_KIND_MAP, res);
    for (int i = 0; win != NULL && i < m && n > 1; i++)
        if (win[i] >= 0)
            close(win[i]);
    free(win);
    return st;
}

/* The transport a pair whose window mapping failed falls back to: the first one after t in
 * the list's order that the rule accepts for the pair and that maps no window, or NONE. */
static int comm_fallback_tl(px_worker *w, const px_domain *d, int a, int b, int t)
{
    comm_choice ch;
    comm_site site;

    comm_site_of(d->cw, d, a, b, &site);
    comm_choose_at(comm_pair_caps(d->cw, d, a, b), &site, PX_COMM_TL_AUTO, 0, d->chips[a],
                   d->chips[b], &ch);
    for (int u = t + 1; u < PX_COMM_TL_COUNT; u++)
        if (ch.accepts[u] && !comm_tl_of(u)->maps_window)
            return u;
    return PX_COMM_TL_NONE;
}

/*
 * Confirm by doing: the pairs whose window mapping failed on a member (res: every member's
 * answer to comm.map; the peers: its row of the description's mapfail) move to the fallback,
 * in the description and in d, both members get the pair's shared memory in one batch, and
 * the log says why. *again is 1 when there were some. A forced direct, or a domain that needs
 * peer pointers, cannot fall back: PX_ENOTSUP with the member's reason.
 */
static px_status comm_fallback(comm_worker *cw, comm_setup *su, px_domain *d,
                               hier_call_result *res, int *again)
{
    int n = d->msg.n, np = 0, *pfd = NULL;
    uint8_t *fail = comm_desc_mapfail(su->desc), *pairs = comm_desc_pairs(su->desc);
    px_status st = PX_OK;
    char why[COMM_WHY_MAX + 64];

    *again = 0;
    comm_batch_begin(su, d);
    for (int i = 0; i < d->nmem && st == PX_OK; i++) {
        const comm_map_reply *rep = (const comm_map_reply *)res[i].reply;
        int a = d->mrank[i];

        if (res[i].reply_n != sizeof(*rep) || rep->failed == 0)
            continue;
        for (int b = 0; b < n && st == PX_OK; b++) {
            int t = d->tl[a * n + b], u;

            if (!fail[a * n + b] || !comm_tl_of(t)->maps_window)
                continue;
            if (d->forced_direct || d->need_peer_ptr)
                return px_set_error(PX_ENOTSUP, "rank %d (chip %d) -> rank %d (chip %d): the "
                                    "facts allow direct but the mapping failed: %s; %s",
                                    a, d->chips[a], b, d->chips[b], rep->why,
                                    d->need_peer_ptr ? "the domain needs peer pointers "
                                    "(need_peer_ptr), which only direct gives" :
                                    "direct is forced (PLEXUS_COMM_TRANSPORT=direct); "
                                    "auto would fall back to staged");
            if ((u = comm_fallback_tl(cw->w, d, a, b, t)) == PX_COMM_TL_NONE)
                return px_set_error(PX_ENOTSUP, "rank %d (chip %d) -> rank %d (chip %d): the "
                                    "%s mapping failed (%s) and no later transport accepts "
                                    "the pair", a, d->chips[a], b, d->chips[b],
                                    comm_tl_name(t), rep->why);
            snprintf(why, sizeof(why), "%s mapping failed: %.200s", comm_tl_name(t),
                     rep->why);
            PX_LOG_WARN("comm[%s]: rank %d -> rank %d: %s; falling back to %s", d->msg.name,
                        a, b, why, comm_tl_name(u));
            if ((st = comm_pair_set(d, a, b, u, why)) != PX_OK)
                return st;
            pairs[a * n + b] = pairs[b * n + a] = (uint8_t)u;
            if (pfd == NULL && (pfd = calloc((size_t)d->nmem * (size_t)n + 1,
                                             sizeof(int))) == NULL)
                return px_set_error(PX_ENOMEM, "out of host memory");
            st = comm_batch_pair(su, d, PX_MIN(a, b), PX_MAX(a, b), pfd, &np);
            *again = 1;
        }
    }
    if (st == PX_OK && *again) /* comm.map again, with the pairs' shared memory */
        st = comm_batch_call(cw, su, d, COMM_KIND_MAP, res);
    if (pfd != NULL)
        comm_batch_close(pfd, np);
    free(pfd);
    return st;
}

/*
 * Gives the MPI proxy the rings of d's members (one per member with mpi peers: transport/mpi.c)
 * and the windows mapped here. Each member formatted its own ring; its chunk is checked
 * against the header (the memory is the chips' to write: the proxy decodes every request
 * against the domain's own bounds, its target rank included).
 */
static px_status comm_proxied_add(comm_worker *cw, px_domain *d)
{
    int n = d->msg.n, nr = 0, *host = calloc((size_t)n, sizeof(int));
    comm_proxy_ring *rings = calloc((size_t)(d->nmem > 0 ? d->nmem : 1), sizeof(*rings));
    px_status st = host != NULL && rings != NULL ? PX_OK :
                   px_set_error(PX_ENOMEM, "out of host memory");

    if (st == PX_OK && (cw->proxy == NULL || d->hwin == NULL))
        st = px_set_error(PX_ESTATE, "a pair takes the mpi transport but the worker has no MPI "
                          "proxy (a defect)");
    for (int a = 0; st == PX_OK && a < n; a++) {
        comm_stg_ring *r = d->pmem[a];

        host[a] = d->hosts != NULL ? d->hosts[a] : comm_proxy_rank(cw->proxy);
        if (r == NULL)
            continue; /* another host's rank, or one without mpi peers */
        if (r->magic != COMM_STG_MAGIC || r->chunk != COMM_MPI_CHUNK) {
            st = px_set_error(PX_EIO, "rank %d: its mpi ring is not formatted (magic %#x, "
                              "chunk %u; a defect of rank %d)", a, r->magic, r->chunk, a);
            break;
        }
        rings[nr++] = (comm_proxy_ring){.a = a, .ring = r, .chunk = COMM_MPI_CHUNK};
    }
    if (st == PX_OK) {
        comm_proxy_dom pd = {.id = d->wire_id, .n = n, .nsig = d->msg.nsig,
                             .data_bytes = d->msg.data_bytes, .window = d->hwin, .host = host,
                             .nrings = nr, .rings = rings,
                             .revoke = d->hosts != NULL ? comm_revoke_word(d) : NULL,
                             .agree = cw->bells != NULL
                                          ? comm_board_agree(cw->bells, d->msg.revoke_slot)
                                          : NULL,
                             .chip = d->chips};

        if ((st = comm_proxy_add(cw->proxy, &pd, cw->w->cfg.timeout_s)) == PX_OK)
            d->in_proxy = 1;
    }
    free(host);
    free(rings);
    return st;
}

void comm_proxied_drop(comm_worker *cw, px_domain *d)
{
    int n = d->msg.n;

    if (d->in_proxy && comm_proxy_remove(cw->proxy, d->wire_id, cw->w->cfg.timeout_s) !=
                           PX_OK) {
        d->in_proxy = 0; /* the proxy may still read its memory: left mapped */
        free(d->pmem);
        free(d->hwin);
        d->pmem = NULL;
        d->hwin = NULL;
        return;
    }
    d->in_proxy = 0;
    for (int i = 0; d->pmem != NULL && i < n; i++)
        if (d->pmem[i] != NULL)
            (void)px_plat_shm_free(NULL, d->pmem[i], d->pmem_bytes);
    for (int q = 0; d->hwin != NULL && q < n; q++)
        if (d->hwin[q] != NULL)
            (void)px_plat_win_host_free(d->hwin[q], px_comm_window_bytes(n, d->msg.nsig,
                                                                         d->msg.data_bytes));
    free(d->pmem);
    free(d->hwin);
    d->pmem = NULL;
    d->hwin = NULL;
}

/* Makes d on its chips: the first batch, create, the windows, map (and again after a
 * fallback), ready; every step a control call to all members at once. On failure every
 * member forgets it. */
px_status comm_make(comm_worker *cw, px_domain *d)
{
    char msg[PX_ERRMSG_MAX];
    hier_call_result *res = calloc((size_t)d->msg.n, sizeof(*res));
    px_status st = res != NULL ? PX_OK : px_set_error(PX_ENOMEM, "out of host memory");
    comm_setup su;
    int again = 0;

    if (st == PX_OK)
        st = comm_setup_init(&su, d);
    else
        memset(&su, 0, sizeof(su)), su.desc_fd = -1;
    if (st == PX_OK)
        st = comm_create(cw, &su, d);
    if (st == PX_OK)
        st = comm_map(cw, &su, d, res);
    if (st == PX_OK)
        st = comm_fallback(cw, &su, d, res, &again);
    for (int i = 0; st == PX_OK && again && i < d->nmem; i++) /* nothing mapped left to fail */
        if (res[i].reply_n == sizeof(comm_map_reply) &&
            ((const comm_map_reply *)res[i].reply)->failed != 0)
            st = px_set_error(PX_EIO, "chip %d: a window mapping failed after the fallback: "
                              "%s", d->mem[i], ((const comm_map_reply *)res[i].reply)->why);
    if (st == PX_OK)
        st = hier_call_run(cw->w, cw->kinds[COMM_KIND_READY], &d->msg, sizeof(d->msg),
                           d->mem, d->nmem, 0, NULL);
    if (st == PX_OK && d->pmem != NULL)
        st = comm_proxied_add(cw, d);
    /* spanning hosts: no host's members may send before every host's proxy serves the
     * domain, and a host that failed its part fails it everywhere */
    if (d->hosts != NULL)
        st = comm_job_sync(cw, d, d->hash, st);
    if (st != PX_OK)
        comm_proxied_drop(cw, d);
    free(res);
    comm_setup_fini(&su, d);
    if (st != PX_OK && strncmp(px_last_error(), "px_domain_alloc: ", 17) != 0) {
        snprintf(msg, sizeof(msg), "%s", px_last_error()); /* (comm_job_sync's has it) */
        px_set_error(st, "px_domain_alloc: domain \"%s\": %s", d->msg.name, msg);
    }
    return st;
}

