/*
 * domain_check.c - the checks of a domain's spec before anything is made: its version and
 * size, the names, the members (a worker's chips or the job's hosts' chips), the buffers'
 * layout in the window, and whether this host can back the domain's memory.
 */
#include "comm/domain_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comm/proxy.h"
#include "runtime/runtime.h"
#include "util/abi.h"
#include "util/util.h"

/* sizes[v - 1]: the size of px_domain_spec version v (as config.c's config_sizes). */
static const uint32_t comm_spec_sizes[] = {sizeof(px_domain_spec)};

static const util_abi_type comm_spec_abi = {"px_domain_spec", "PX_DOMAIN_SPEC_INIT",
                                            comm_spec_sizes, PX_ARRAY_SIZE(comm_spec_sizes)};

/* Copies the caller's spec into *out as this library's (size and version checked; the
 * fields an older spec lacks are 0). Returns PX_OK or PX_EINVAL (message set). */
px_status comm_spec_import(const px_domain_spec *spec, px_domain_spec *out)
{
    px_status st = util_abi_check(&comm_spec_abi, "px_domain_alloc", spec->size,
                                  spec->version);

    if (st != PX_OK)
        return st;
    memset(out, 0, sizeof(*out));
    memcpy(out, spec, spec->size);
    out->size = sizeof(*out);
    out->version = PX_DOMAIN_SPEC_VERSION;
    return PX_OK;
}

/* Checks a name of 1..31 characters; `what` names the field. */
px_status comm_check_name(const char *name, const char *what)
{
    size_t n = name != NULL ? strlen(name) : 0;

    if (n == 0 || n >= PX_DOMAIN_NAME_MAX)
        return px_set_error(PX_EINVAL, "px_domain_alloc: %s \"%s\" must have 1..%d characters",
                            what, name ? name : "(null)", PX_DOMAIN_NAME_MAX - 1);
    return PX_OK;
}

/* Each global chip of s once (every member names a host of the job): a host's chips are < 64
 * (a worker's), so a mask per host (linear in n, not the n^2 of comparing every pair at 1024
 * ranks). PX_OK, or PX_EINVAL / PX_ENOMEM with a message. */
static px_status comm_check_global_once(const px_domain_spec *s, int hosts)
{
    uint64_t *seen = calloc((size_t)hosts, sizeof(uint64_t));
    px_status st = PX_OK;

    if (seen == NULL)
        st = px_set_error(PX_ENOMEM, "px_domain_alloc: out of host memory");
    for (int r = 0; st == PX_OK && r < s->nchips; r++) {
        int h = (s->chips[r] & ~PX_CHIP_GLOBAL_BIT) >> 16, c = s->chips[r] & 0xFFFF;

        if (c >= 64 || (seen[h] >> c & 1))
            st = c >= 64 ? px_set_error(PX_EINVAL, "px_domain_alloc: domain \"%s\": chip "
                                        "%d of host %d: a host has at most 64 chips",
                                        s->name, c, h)
                         : px_set_error(PX_EINVAL, "px_domain_alloc: domain \"%s\": chip "
                                        "%d of host %d appears twice in chips", s->name, c,
                                        h);
        else
            seen[h] |= 1ull << c;
    }
    free(seen);
    return st;
}

/*
 * The members of a spec naming global chips (px_chip_global): every one so, on a host of the
 * job, each once, every host with one at least (each host's part of the set-up and of every
 * collective is its members'). Fills *job with 1.
 */
static px_status comm_check_global(comm_worker *cw, const px_domain_spec *s, int *job)
{
    const comm_proxy *p = cw->proxy;
    int hosts = p != NULL ? comm_proxy_size(p) : 1, with = 0;
    unsigned char *have;
    px_status st = PX_OK;

    *job = 1;
    if (p == NULL)
        return px_set_error(PX_EINVAL, "px_domain_alloc: domain \"%s\": chips[0] = %#x names a "
                            "chip of a host (px_chip_global), but this worker does not run "
                            "under MPI (%s); name this worker's chips 0..%d, or run under "
                            "mpirun", s->name, (unsigned)s->chips[0], cw->mpi_why,
                            hier_nchips(cw->w) - 1);
    if ((have = calloc((size_t)hosts, 1)) == NULL)
        return px_set_error(PX_ENOMEM, "px_domain_alloc: out of host memory");
    for (int r = 0; r < s->nchips && st == PX_OK; r++) {
        int g = s->chips[r], h = (g & ~PX_CHIP_GLOBAL_BIT) >> 16, c = g & 0xFFFF;

        if (g < 0 || !(g & PX_CHIP_GLOBAL_BIT))
            st = px_set_error(PX_EINVAL, "px_domain_alloc: domain \"%s\": chips[%d] = %d is "
                              "a chip of this worker while chips[0] names a host's chip "
                              "(px_chip_global): name every member one way", s->name, r, g);
        else if (h >= hosts)
            st = px_set_error(PX_EINVAL, "px_domain_alloc: domain \"%s\": chips[%d] names chip "
                              "%d of host %d; the job has %d hosts (0..%d): name a host of the "
                              "job", s->name, r, c, h, hosts, hosts - 1);
        else if (c >= comm_proxy_host(p, h)->chips)
            st = px_set_error(PX_EINVAL, "px_domain_alloc: domain \"%s\": chips[%d] names chip "
                              "%d of host %d, which has %d chips (0..%d): name a chip it has, "
                              "or start every host with as many chips (--chips)", s->name, r,
                              c, h, comm_proxy_host(p, h)->chips,
                              comm_proxy_host(p, h)->chips - 1);
        else if (!have[h]++)
            with++;
    }
    if (st == PX_OK)
        st = comm_check_global_once(s, hosts);
    free(have);
    if (st != PX_OK)
        return st;
    if (with < hosts)
        return px_set_error(PX_ENOTSUP, "px_domain_alloc: domain \"%s\": its members are chips "
                            "of %d of the job's %d hosts; a domain spanning hosts has members "
                            "on every host for now (each host's part of the set-up and of every "
                            "collective is its members')", s->name, with, hosts);
    return PX_OK;
}

/* Checks the members: chips of the worker (at most 64, a worker's), each once; or global
 * chips (comm_check_global); 1..PX_COMM_MAX_RANKS of them. */
px_status comm_check_members(comm_worker *cw, const px_domain_spec *s, int *job)
{
    px_worker *w = cw->w;
    uint64_t seen = 0;
    int nchips = hier_nchips(w);

    *job = 0;
    if (s->chips == NULL || s->nchips < 1 || s->nchips > PX_COMM_MAX_RANKS)
        return px_set_error(PX_EINVAL, "px_domain_alloc: domain \"%s\": nchips %d (chips %s); a "
                            "domain has 1..%d member chips", s->name, s->nchips,
                            s->chips ? "set" : "NULL", PX_COMM_MAX_RANKS);
    if (s->chips[0] >= 0 && (s->chips[0] & PX_CHIP_GLOBAL_BIT))
        return comm_check_global(cw, s, job);
    for (int r = 0; r < s->nchips; r++) {
        int c = s->chips[r];

        if (c < 0 || c >= nchips)
            return px_set_error(PX_EINVAL, "px_domain_alloc: domain \"%s\": chips[%d] = %d is "
                                "not a chip of this worker (0..%d)", s->name, r, c, nchips - 1);
        if (seen >> c & 1)
            return px_set_error(PX_EINVAL, "px_domain_alloc: domain \"%s\": chip %d appears "
                                "twice in chips", s->name, c);
        seen |= 1ull << c;
    }
    return PX_OK;
}

/* Checks the buffers and lays them out into m. */
px_status comm_layout(const px_domain_spec *s, comm_create_msg *m)
{
    size_t off = 0;

    if (s->window_bytes == 0)
        return px_set_error(PX_EINVAL, "px_domain_alloc: domain \"%s\": window_bytes is 0",
                            s->name);
    if (s->buffers == NULL || s->nbuffers < 1 || s->nbuffers > PX_DOMAIN_MAX_BUFFERS)
        return px_set_error(PX_EINVAL, "px_domain_alloc: domain \"%s\": nbuffers %d; give "
                            "1..%d buffers", s->name, s->nbuffers, PX_DOMAIN_MAX_BUFFERS);
    if (s->nsignals < 0 || s->nsignals > PX_COMM_MAX_SIGNALS)
        return px_set_error(PX_EINVAL, "px_domain_alloc: domain \"%s\": nsignals %d; use "
                            "0..%d", s->name, s->nsignals, PX_COMM_MAX_SIGNALS);
    for (int i = 0; i < s->nbuffers; i++) {
        const px_domain_buffer *b = &s->buffers[i];
        char what[48];
        px_status st;

        snprintf(what, sizeof(what), "buffers[%d].name", i);
        if ((st = comm_check_name(b->name, what)) != PX_OK)
            return st;
        for (int j = 0; j < i; j++)
            if (strcmp(s->buffers[j].name, b->name) == 0)
                return px_set_error(PX_EINVAL, "px_domain_alloc: domain \"%s\": buffer name "
                                    "\"%s\" is used twice (buffers[%d] and [%d])", s->name,
                                    b->name, j, i);
        if (b->bytes == 0)
            return px_set_error(PX_EINVAL, "px_domain_alloc: domain \"%s\": buffer \"%s\" has "
                                "0 bytes", s->name, b->name);
        off = px_align_up(off, 64);
        if (b->bytes > s->window_bytes || off > s->window_bytes - b->bytes)
            return px_set_error(PX_EINVAL, "px_domain_alloc: domain \"%s\": buffer \"%s\" (%zu "
                                "bytes at offset %zu) does not fit in the window of %zu bytes; "
                                "raise window_bytes or shrink the buffers", s->name, b->name,
                                b->bytes, off, s->window_bytes);
        snprintf(m->buffers[i].name, sizeof(m->buffers[i].name), "%s", b->name);
        m->buffers[i].off = off;
        m->buffers[i].bytes = b->bytes;
        off += b->bytes;
    }
    m->nbuffers = s->nbuffers;
    m->nsig = (uint32_t)s->nsignals;
    m->data_bytes = s->window_bytes;
    return PX_OK;
}

/* MemAvailable + SwapFree of /proc/meminfo in bytes (what the host can back now; the
 * numbers go into *avail and *swap), or 0 when it cannot be read. */
static uint64_t comm_host_backable(uint64_t *avail, uint64_t *swap)
{
    char line[128];
    unsigned long long v;
    FILE *f = fopen("/proc/meminfo", "r");

    *avail = *swap = 0;
    if (f == NULL)
        return 0;
    while (fgets(line, sizeof(line), f) != NULL) {
        if (sscanf(line, "MemAvailable: %llu kB", &v) == 1)
            *avail = (uint64_t)v << 10;
        else if (sscanf(line, "SwapFree: %llu kB", &v) == 1)
            *swap = (uint64_t)v << 10;
    }
    fclose(f);
    return *avail + *swap;
}

/* The memory this host's pairs of d need besides the windows (their transports' prepare():
 * a pair's staging memory, or one ring per member of this host for a per_rank transport, not
 * one per pair), into *stage; *pairs: how many of its pairs need some. PX_OK or PX_ENOMEM. */
static px_status comm_pairs_memory(const px_domain *d, uint64_t *stage, int *pairs)
{
    int n = d->msg.n;
    unsigned char *ringed = calloc((size_t)n, 1); /* rank: its per_rank memory counted */

    if (ringed == NULL)
        return px_set_error(PX_ENOMEM, "px_domain_alloc: out of host memory");
    for (int a = 0; a < n; a++) {
        for (int b = a + 1; b < n; b++) {
            const px_comm_tl *t = comm_tl_of(d->tl[a * n + b]);
            size_t bytes = t->prepare != NULL ? t->prepare(n) : 0;

            if (d->mpos[a] < 0 && d->mpos[b] < 0)
                continue; /* another host's pair */
            *pairs += bytes > 0;
            if (!t->per_rank) {
                *stage += bytes;
                continue;
            }
            /* per_rank (mpi): one ring per member of this host, whatever its peers */
            for (int k = 0; k < 2; k++) {
                int r = k == 0 ? a : b;

                if (d->mpos[r] >= 0 && !ringed[r]) {
                    ringed[r] = 1;
                    *stage += bytes;
                }
            }
        }
    }
    free(ringed);
    return PX_OK;
}

/*
 * Refuses a domain whose memory on this host (every rank's window, head and slots included,
 * plus the staging memory of its staged pairs and one mpi ring per member with mpi peers) is
 * more than PLEXUS_COMM_MEM_MAX, or, with that 0 (the default), more than the host can back
 * now (MemAvailable + SwapFree): windows are backed on first touch, and a window the host
 * cannot back would fail there (SIGBUS in a chip), not here.
 */
px_status comm_check_memory(px_worker *w, const px_domain *d)
{
    uint64_t win = px_comm_window_bytes(d->msg.n, d->msg.nsig, d->msg.data_bytes), need;
    uint64_t avail, swap, limit = w->cfg.comm_mem_max, stage = 0;
    int pairs = 0;
    px_status st = comm_pairs_memory(d, &stage, &pairs);

    if (st != PX_OK)
        return st;
    /* this host's part: its members' windows and its pairs' memory */
    if (__builtin_mul_overflow(win, (uint64_t)d->nmem, &need) ||
        __builtin_add_overflow(need, stage, &need))
        need = UINT64_MAX;
    if (limit != 0) {
        if (need <= limit)
            return PX_OK;
        return px_set_error(PX_ENOMEM, "px_domain_alloc: domain \"%s\": %d windows of %llu "
                            "bytes (%llu with head and slots)%s need %llu bytes of host memory, "
                            "more than PLEXUS_COMM_MEM_MAX (%llu); lower window_bytes or the "
                            "ranks, or raise PLEXUS_COMM_MEM_MAX", d->msg.name, d->nmem,
                            (unsigned long long)d->msg.data_bytes, (unsigned long long)win,
                            pairs ? " and their staging memory" : "",
                            (unsigned long long)need, (unsigned long long)limit);
    }
    limit = comm_host_backable(&avail, &swap);
    if (limit == 0 || need <= limit)
        return PX_OK; /* no /proc/meminfo: nothing to check against */
    return px_set_error(PX_ENOMEM, "px_domain_alloc: domain \"%s\": %d windows of %llu bytes "
                        "(%llu with head and slots)%s need %llu bytes of host memory; this "
                        "host can back %llu now (MemAvailable %llu + SwapFree %llu, "
                        "/proc/meminfo), and a window is backed when first touched: lower "
                        "window_bytes or the ranks, free memory, or set PLEXUS_COMM_MEM_MAX "
                        "to the bytes to allow if the windows will stay mostly untouched",
                        d->msg.name, d->nmem, (unsigned long long)d->msg.data_bytes,
                        (unsigned long long)win, pairs ? " and their staging memory" : "",
                        (unsigned long long)need, (unsigned long long)limit,
                        (unsigned long long)avail, (unsigned long long)swap);
}
