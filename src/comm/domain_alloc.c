/*
 * domain_alloc.c - making a domain (px_domain_alloc, and a shrink's new domain): the handle
 * filled from a checked spec, the transport of every pair and why (the pair tables), the
 * reserved addresses, the set-up on the chips, the log of the choice; and freeing, forgetting
 * and aborting one.
 */
#include "comm/domain_internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "comm/proxy.h"
#include "runtime/runtime.h"
#include "util/log.h"
#include "util/util.h"

/* The index of reason why in d's table, added when new (-1: out of memory or full). Reasons
 * repeat over runs of pairs (every pair of two hosts has one), so the last is tried first. */
static int comm_why_index(px_domain *d, const char *why)
{
    if (d->nwhy > 0 && strncmp(d->whys[d->last_why], why, COMM_WHY_MAX - 1) == 0)
        return d->last_why;
    for (int i = 0; i < d->nwhy; i++)
        if (strncmp(d->whys[i], why, COMM_WHY_MAX - 1) == 0)
            return d->last_why = i;
    if (d->nwhy == UINT16_MAX + 1)
        return -1;
    if (d->nwhy == d->cwhy) {
        int c = d->cwhy ? 2 * d->cwhy : 16;
        char (*t)[COMM_WHY_MAX] = realloc(d->whys, (size_t)c * sizeof(*t));

        if (t == NULL)
            return -1;
        d->whys = t;
        d->cwhy = c;
    }
    /* the precision bounds the copy (a reason is cut at COMM_WHY_MAX - 1 bytes) */
    snprintf(d->whys[d->nwhy], COMM_WHY_MAX, "%.*s", COMM_WHY_MAX - 1, why);
    return d->last_why = d->nwhy++;
}

/* Sets the transport of ranks a and b (both directions) and why. */
px_status comm_pair_set(px_domain *d, int a, int b, int tl, const char *why)
{
    int n = d->msg.n, i = comm_why_index(d, why);

    if (i < 0)
        return px_set_error(PX_ENOMEM, "px_domain_alloc: out of host memory for the pairs' "
                            "reasons (%d distinct ones)", d->nwhy);
    d->tl[a * n + b] = d->tl[b * n + a] = (uint8_t)tl;
    d->why_of[a * n + b] = d->why_of[b * n + a] = (uint16_t)i;
    return PX_OK;
}

const char *comm_pair_why(const px_domain *d, int a, int b)
{
    if (d->why_of == NULL || d->whys == NULL)
        return "";
    return d->whys[d->why_of[a * d->msg.n + b]];
}

/* Asks every member to forget d (comm.free, ordered); with chips_alive 0 (destroy, or the
 * chips forgot it already) only the parent's part. A member that fails it (other than by
 * being dead: the dead hold nothing) is reported at warn with its answer. */
void comm_free_domain(comm_worker *cw, px_domain *d, int chips_alive)
{
    comm_id_msg m = {.id = d->id};
    hier_call_result *res = chips_alive && d->nmem > 0 ? calloc((size_t)d->nmem, sizeof(*res))
                                                       : NULL;

    comm_proxied_drop(cw, d);
    if (res != NULL)
        (void)hier_call_run(cw->w, cw->kinds[COMM_KIND_FREE], &m, sizeof(m), d->mem, d->nmem,
                            0, res);
    for (int r = 0; res != NULL && r < d->nmem; r++)
        if (res[r].st != PX_OK && res[r].st != PX_EPEERDEAD)
            PX_LOG_WARN("comm[%s]: chip %d did not free the domain (%s): %.*s; its window "
                        "stays until the chip ends", d->msg.name, d->mem[r],
                        px_status_name(res[r].st), (int)sizeof(res[r].reply), res[r].reply);
    free(res);
    if (d->vbase != NULL)
        munmap(d->vbase, d->vbytes);
    d->vbase = NULL;
    comm_dfx_keep_kgens(cw, d);
    d->state = COMM_FREED;
}

/*
 * Asks d's members to forget it at once (comm.forget, service route): only when no task can be
 * using it. Returns 1 when every member did (or is dead, and holds nothing any more); 0 leaves
 * d to comm.free at the end of the run. The current message is kept.
 */
int comm_forget(comm_worker *cw, px_domain *d)
{
    char msg[PX_ERRMSG_MAX];
    comm_id_msg m = {.id = d->id};
    hier_call_result *res = calloc((size_t)(d->nmem > 0 ? d->nmem : 1), sizeof(*res));
    int ok = res != NULL;

    snprintf(msg, sizeof(msg), "%s", px_last_error());
    comm_proxied_drop(cw, d);
    if (res != NULL && d->nmem > 0)
        (void)hier_call_run(cw->w, cw->kinds[COMM_KIND_FORGET], &m, sizeof(m), d->mem,
                            d->nmem, 0, res);
    for (int r = 0; r < d->nmem && ok; r++)
        ok = res[r].st == PX_OK || res[r].st == PX_EPEERDEAD;
    if (!ok)
        PX_LOG_DEBUG("comm[%s]: a member did not forget it; freed at the end of the run",
                     d->msg.name);
    free(res);
    (void)px_set_error(PX_OK, "%s", msg);
    return ok;
}

/* After a failed allocation (why: its status, message set): the members that are alive
 * forget d at once, so no window, mapping or descriptor of it stays in a survivor; the
 * allocation's status and message are kept. */
void comm_abort(comm_worker *cw, px_domain *d, px_status why)
{
    char msg[PX_ERRMSG_MAX];

    snprintf(msg, sizeof(msg), "%s", px_last_error());
    d->failed = 1;
    if (comm_forget(cw, d))
        comm_free_domain(cw, d, 0);
    else
        d->state = COMM_RELEASED;
    px_set_error(why, "%s", msg);
}

/* A revoke slot that no domain of cw still held by chips has (round robin from the last
 * one given), or -1 when all are taken. */
static int comm_revoke_slot(comm_worker *cw)
{
    uint8_t used[COMM_REVOKE_SLOTS];
    int start = cw->next_slot;

    memset(used, 0, sizeof(used));
    for (const px_domain *e = cw->doms; e != NULL; e = e->next)
        if (e->state != COMM_FREED)
            used[e->msg.revoke_slot] = 1;
    for (int i = 0; i < COMM_REVOKE_SLOTS; i++) {
        int s = (start + i) % COMM_REVOKE_SLOTS;

        if (!used[s]) {
            cw->next_slot = (s + 1) % COMM_REVOKE_SLOTS;
            return s;
        }
    }
    return -1;
}

/* Fills d from a checked spec; PX_OK or PX_ENOMEM. */
static px_status comm_fill(comm_worker *cw, px_domain *d, const px_domain_spec *s)
{
    px_worker *w = cw->w;
    int n = s->nchips;

    int job = s->chips[0] & PX_CHIP_GLOBAL_BIT, me = cw->proxy ? comm_proxy_rank(cw->proxy) : 0;

    if ((d->chips = calloc((size_t)n, sizeof(*d->chips))) == NULL ||
        (d->tl = calloc((size_t)n * (size_t)n, sizeof(*d->tl))) == NULL ||
        (d->mem = calloc((size_t)n, sizeof(int))) == NULL ||
        (d->mrank = calloc((size_t)n, sizeof(int))) == NULL ||
        (d->mpos = calloc((size_t)n, sizeof(int))) == NULL ||
        (job && (d->hosts = calloc((size_t)n, sizeof(int))) == NULL))
        return px_set_error(PX_ENOMEM, "px_domain_alloc: out of host memory for %d ranks' "
                            "tables", n);

    d->magic = COMM_DOMAIN_MAGIC;
    d->id = cw->next_id++;
    d->cw = cw;
    d->run = cw->run;
    d->need_peer_ptr = s->need_peer_ptr;
    d->msg.id = d->id;
    d->msg.n = s->nchips;
    d->msg.timeout_s = w->cfg.comm_timeout_s;
    d->msg.oneshot_max = w->cfg.comm_oneshot_max;
    d->msg.spin_ns = w->cfg.spin_ns;
    d->msg.desc_bytes = comm_desc_bytes(n);
    d->msg.yield_ns = w->cfg.yield_ns;
    snprintf(d->msg.name, sizeof(d->msg.name), "%s", s->name);
    d->wire_id = job ? 0x80000000u | cw->next_job++ : d->id;
    if ((d->msg.revoke_slot = comm_revoke_slot(cw)) < 0)
        return px_set_error(PX_ENOMEM, "px_domain_alloc: every one of the %d revoke slots is "
                            "held by a domain not freed yet; release domains you no longer use",
                            COMM_REVOKE_SLOTS);
    atomic_store_explicit(&comm_board_revokes(cw->bells)->word[d->msg.revoke_slot], 0,
                          memory_order_release);
    /* the kernel-side shrinks' row of the slot: no domain the chips hold uses it now */
    memset((void *)comm_board_agree(cw->bells, d->msg.revoke_slot), 0, sizeof(comm_agree_row));
    for (int r = 0; r < n; r++) {
        int c = s->chips[r], h = job ? (c & ~PX_CHIP_GLOBAL_BIT) >> 16 : me;

        d->chips[r] = job ? c & 0xFFFF : c;
        if (d->hosts != NULL)
            d->hosts[r] = h;
        d->mpos[r] = -1;
        if (h == me) {
            d->mpos[r] = d->nmem;
            d->mrank[d->nmem] = r;
            d->mem[d->nmem++] = d->chips[r];
        }
    }
    return PX_OK;
}

/* Logs the domain, then each pair's choice once, in the shape every run-time choice has; past
 * COMM_LOG_PAIRS ranks each distinct choice once, with its count of pairs (a domain of 1024
 * ranks has half a million pairs). */
#define COMM_LOG_PAIRS 64
static void comm_log_choice(const px_domain *d)
{
    int n = d->msg.n, *first = NULL;
    size_t cap = (size_t)n * 12 + 1, len = 0;
    long long *count = NULL;
    char *chips;

    if (px_log_level_g < PX_LOG_INFO || (chips = malloc(cap)) == NULL)
        return;
    chips[0] = '\0';
    for (int r = 0; r < n && len < cap; r++)
        len += d->hosts != NULL
                   ? (size_t)snprintf(chips + len, cap - len, "%s%d:%d", r ? "," : "",
                                      d->hosts[r], d->chips[r])
                   : (size_t)snprintf(chips + len, cap - len, "%s%d", r ? "," : "",
                                      d->chips[r]);
    PX_LOG_INFO("comm[%s]: %d ranks (chips %s), window %llu bytes, %u signals", d->msg.name,
                n, chips, (unsigned long long)d->msg.data_bytes, d->msg.nsig);
    free(chips);
    if (n <= COMM_LOG_PAIRS) {
        for (int a = 0; a < n; a++)
            for (int b = a + 1; b < n; b++)
                PX_LOG_INFO("comm[%s]: rank %d -> rank %d via %s (%s)", d->msg.name, a, b,
                            comm_tl_name(d->tl[a * n + b]), comm_pair_why(d, a, b));
        return;
    }
    if ((count = calloc((size_t)d->nwhy, sizeof(*count))) == NULL ||
        (first = calloc((size_t)d->nwhy, sizeof(*first))) == NULL) {
        free(count);
        return;
    }
    for (int a = 0; a < n; a++)
        for (int b = a + 1; b < n; b++) {
            int w = d->why_of[a * n + b];

            if (count[w]++ == 0)
                first[w] = a * n + b;
        }
    for (int w = 0; w < d->nwhy; w++)
        if (count[w] > 0)
            PX_LOG_INFO("comm[%s]: %lld pairs via %s (%s), the first rank %d -> rank %d",
                        d->msg.name, count[w], comm_tl_name(d->tl[first[w]]), d->whys[w],
                        first[w] / n, first[w] % n);
    free(count);
    free(first);
}

void comm_domain_tables_free(px_domain *d)
{
    free(d->kexcl);
    free(d->why_of);
    free(d->whys);
    free(d->chips);
    free(d->tl);
    free(d->hosts);
    free(d->mem);
    free(d->mrank);
    free(d->mpos);
}

/* The checks before a domain is made: spec (imported into *spec_in: the caller's copy), the
 * orchestration's worker (*w, *cw), the name and members (*job: they name hosts' chips), a
 * live name other than carry's, and a free slot on every member. */
static px_status comm_alloc_check(px_orch *o, const px_domain_spec *spec, const px_domain *carry,
                                  px_domain_spec *spec_in, px_worker **w, comm_worker **cw,
                                  int *job)
{
    px_status st;

    if ((st = comm_spec_import(spec, spec_in)) != PX_OK)
        return st;
    spec = spec_in;
    if ((st = hier_orch_worker(o, "px_domain_alloc", w)) != PX_OK)
        return st;
    if ((*cw = comm_worker_of(*w)) == NULL)
        return px_set_error(PX_ESTATE, "px_domain_alloc: this worker has no communication "
                            "state (it was created without level 3)");
    if ((st = comm_check_name(spec->name, "name")) != PX_OK ||
        (st = comm_check_members(*cw, spec, job)) != PX_OK)
        return st;
    /* a shrink's successor takes its predecessor's name; the shrunk generations before it
     * (live until released, and unusable: shrunk domains are revoked) keep that name too */
    for (px_domain *e = (*cw)->doms; e != NULL; e = e->next)
        if (e->state == COMM_LIVE && e != carry && !(carry != NULL && e->shrunk) &&
            strcmp(e->msg.name, spec->name) == 0)
            return px_set_error(PX_EINVAL, "px_domain_alloc: a live domain is called \"%s\" "
                                "already; release it or choose another name", spec->name);
    return comm_slots_wait(*cw, spec);
}

/* Reserves the addresses that stand for d's windows (PROT_NONE, never touched). */
static px_status comm_reserve(px_domain *d, const px_domain_spec *spec)
{
    size_t vbytes;

    if (__builtin_mul_overflow(spec->window_bytes, (size_t)spec->nchips, &vbytes))
        return px_set_error(PX_EINVAL, "px_domain_alloc: domain \"%s\": %d windows of %zu bytes "
                            "overflow the address space", spec->name, spec->nchips,
                            spec->window_bytes);
    d->vbase = mmap(NULL, vbytes, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (d->vbase == MAP_FAILED) {
        d->vbase = NULL;
        return px_set_error(PX_ENOMEM, "px_domain_alloc: domain \"%s\": cannot reserve %zu bytes "
                            "of addresses: %s", spec->name, vbytes, strerror(errno));
    }
    d->vbytes = vbytes;
    return PX_OK;
}

/* Lays d out from spec, selects its pairs' transports and checks its memory; a domain spanning
 * hosts is agreed on by every host (each hears why one cannot make its part) before any
 * makes its part. */
static px_status comm_plan(comm_worker *cw, px_domain *d, const px_domain_spec *spec,
                           const px_domain *carry)
{
    px_status st;

    if ((st = comm_layout(spec, &d->msg)) != PX_OK || (st = comm_fill(cw, d, spec)) != PX_OK)
        return st;
    if (carry != NULL) {
        d->msg.carry_id = carry->id;
        d->generation = carry->generation + 1;
    }
    if ((st = comm_select(cw->w, d)) == PX_OK)
        st = comm_check_memory(cw->w, d);
    if (d->hosts != NULL)
        st = comm_job_agree(cw, d, spec, st);
    else if (st != PX_OK) /* failed before its hosts were known: the others still hear it */
        st = comm_job_refuse(cw, spec, st);
    return st;
}

/* px_domain_alloc, and px_domain_shrink's new domain: carry is the old domain whose window
 * bytes the members copy (NULL: none), which the live-name check passes over. */
px_status comm_alloc(px_orch *o, const px_domain_spec *spec, const px_domain *carry,
                     px_domain **out)
{
    px_domain_spec spec_in = PX_DOMAIN_SPEC_INIT;
    px_worker *w;
    comm_worker *cw = NULL;
    px_domain *d;
    px_status st;
    int job = 0;

    if (spec == NULL || out == NULL)
        return px_set_error(PX_EINVAL, "px_domain_alloc: spec and output are required");
    /* a spanning spec that fails here still joins the hosts' agreement (cw set: spec_in is
     * the imported spec) */
    if ((st = comm_alloc_check(o, spec, carry, &spec_in, &w, &cw, &job)) != PX_OK)
        return comm_job_refuse(cw, &spec_in, st);
    spec = &spec_in;
    if ((d = calloc(1, sizeof(*d))) == NULL)
        return px_set_error(PX_ENOMEM, "px_domain_alloc: out of host memory");
    if ((st = comm_plan(cw, d, spec, carry)) != PX_OK)
        goto out_free;
    if ((st = comm_reserve(d, spec)) != PX_OK || (st = comm_handle_add(d)) != PX_OK) {
        if (d->hosts != NULL) /* the other hosts go on to the set-up's agreement: told why */
            st = comm_job_sync(cw, d, d->hash, st);
        goto out_free;
    }
    d->next = cw->doms;
    cw->doms = d;
    if ((st = comm_make(cw, d)) != PX_OK) {
        comm_abort(cw, d, st); /* the handle is not given out */
        return st;
    }
    d->state = COMM_LIVE;
    comm_log_choice(d);
    *out = d;
    return PX_OK;

out_free:
    if (d->vbase != NULL)
        munmap(d->vbase, d->vbytes);
    comm_domain_tables_free(d);
    free(d);
    return st;
}

px_status px_domain_alloc(px_orch *o, const px_domain_spec *spec, px_domain **out)
{
    return comm_alloc(o, spec, NULL, out);
}
