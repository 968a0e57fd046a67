/*
 * dfx_hosts.c - DFX across the hosts of an MPI job (level 4): one set of outputs, written by
 * host 0.
 *
 * Every host of the job is a level-3 worker with its own DFX. Under MPI each writes its
 * level-3 outputs into DIR/hosts/host<h>/ (h its MPI rank; comm's init hook moves them
 * there before the fork, hier_dfx_subdir), so hosts that share DIR (one machine, a shared
 * file system) never fight over DIR's lock. At the end of each run with DFX on, after the
 * host's level-3 merge (hier_hooks.dfx_merged), every host takes part in a gather carried by
 * the MPI proxies (the only thread that calls MPI):
 *   1. an allgather of each host's header: its merge's status, its files' sizes, its DFX
 *      run's start in ns of its own clock;
 *   2. host 0 alone: a clock estimate (comm_proxy_clock: 16 pings per host, one at a time,
 *      the least round trip gives the offset and half of it the uncertainty) while the other
 *      hosts wait in the next allgather, their proxies answering the pings;
 *   3. the files, in rounds of DFXH_CHUNK bytes per host (an allgather per round: memory stays
 *      hosts x chunk whatever the files' sizes); host 0 keeps every host's bytes.
 * Host 0 then writes each other host's files into DIR/hosts/host<h>/ and hands every host,
 * with its clock, to the DFX merge, which writes the job's one set into DIR (dfx_merge_run,
 * level 4; reading and writing a host's files is the merge's too: dfx/merge/host_files.c).
 * Every step is bounded by PLEXUS_TIMEOUT_S: a host that is gone or stopped makes the
 * allgather time out, and host 0 writes what it has, listing the hosts it lacks in dfx.json's
 * hosts_missing, and fails the run saying so.
 */
#include "comm/dfx_hosts.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <plexus/dfx.h>

#include "dfx/dfx.h"
#include "dfx/merge/merge.h"
#include "hier/ext.h"
#include "mpi/mpi_load.h"
#include "util/file.h"
#include "util/log.h"
#include "util/util.h"

#define DFXH_MAGIC 0x50584448u  /* "PXDH" */
#define DFXH_CHUNK (1u << 20)    /* bytes per host and round */
#define DFXH_CLOCK_ROUNDS 16
#define DFXH_RATE_SPAN_NS 10000000ull /* a rate from estimates at least 10 ms apart */

/* What each host says first (plain bytes: it crosses the wire). */
typedef struct dfxh_head {
    uint32_t magic;
    int32_t st;          /* PX_OK: its files follow */
    uint64_t trace_len;  /* 0: no trace (dfx_merge_files) */
    uint64_t dfx_len;
    double t0_ns;        /* its DFX run's start, ns of its own clock */
    char id[128];        /* its host id */
    char msg[256];       /* st != PX_OK: why it has no files */
    char job[PX_DFX_OUT_MAX]; /* its job directory DIR (host 0's: where the merge goes) */
} dfxh_head;

/* Where this process's last gather left the outputs (comm_dfx_hosts_where): one worker per
 * process runs under MPI, so one record; lock: dfxh_where_lock. */
static pthread_mutex_t dfxh_where_lock = PTHREAD_MUTEX_INITIALIZER;
static struct {
    int valid, host;
    char own[PX_DFX_OUT_MAX], merged[PX_DFX_OUT_MAX], merged_by[128];
} dfxh_where;

px_status comm_dfx_hosts_init(px_worker *w)
{
    char sub[32];

    if ((w->cfg.dfx & PX_DFX_ALL) == 0)
        return PX_OK;
    snprintf(sub, sizeof(sub), "hosts/host%d", px_mpi_launcher_rank());
    PX_LOG_INFO("dfx: under MPI: this host writes its outputs into %s/%s; host 0 merges the "
                "job's into %s", px_dfx_out_dir(&w->cfg), sub, px_dfx_out_dir(&w->cfg));
    return hier_dfx_subdir(w, sub);
}

/* This host's header and files (its level-3 merge's status st; job its DIR). */
static void dfxh_own(const char *dir, const char *job, px_status st, const char *host_id,
                     dfxh_head *h, dfx_merge_files *f)
{
    memset(h, 0, sizeof(*h));
    h->magic = DFXH_MAGIC;
    snprintf(h->id, sizeof(h->id), "%s", host_id);
    snprintf(h->job, sizeof(h->job), "%s", job);
    if (st == PX_OK)
        st = dfx_merge_files_read(dir, f);
    h->st = st;
    if (st != PX_OK) {
        snprintf(h->msg, sizeof(h->msg), "%s", px_last_error());
        return;
    }
    h->trace_len = f->trace_len;
    h->dfx_len = f->dfx_len;
    h->t0_ns = f->t0_ns;
}

/* The gather's state. */
typedef struct dfxh {
    comm_proxy *p;
    int me, n;
    double timeout_s;
    dfxh_head *heads;      /* n */
    char **blob;           /* host 0: n, each host's files (dfx_merge_files_slice) */
    dfx_merge_src *hosts;  /* host 0: n, the merge's input */
    char why[512];         /* the gather's failure, for every host it left missing */
} dfxh;

/* Marks every host but 0 whose bytes are not all in missing, with d->why. */
static void dfxh_lose_rest(dfxh *d)
{
    for (int h = 1; h < d->n; h++) {
        if (d->hosts[h].st != PX_OK)
            continue;
        d->hosts[h].st = PX_ETIMEDOUT;
        snprintf(d->hosts[h].msg, sizeof(d->hosts[h].msg), "%s", d->why);
    }
}

/* Step 3: the files, chunk by chunk. Returns PX_OK or the allgather's error. */
static px_status dfxh_files_gather(dfxh *d, const dfx_merge_files *own)
{
    uint64_t most = 0, rounds;
    char *in = malloc(DFXH_CHUNK), *out = malloc((size_t)d->n * DFXH_CHUNK);
    px_status st = PX_OK;

    for (int h = 0; h < d->n; h++)
        if (d->heads[h].st == PX_OK)
            most = PX_MAX(most, d->heads[h].trace_len + d->heads[h].dfx_len);
    rounds = (most + DFXH_CHUNK - 1) / DFXH_CHUNK;
    if (in == NULL || out == NULL)
        st = px_set_error(PX_ENOMEM, "dfx: out of host memory gathering the hosts' outputs");
    for (uint64_t r = 0; st == PX_OK && r < rounds; r++) {
        dfx_merge_files_slice(own, r * DFXH_CHUNK, in, DFXH_CHUNK);
        st = comm_proxy_allgather(d->p, in, DFXH_CHUNK, out, d->timeout_s);
        for (int h = 0; st == PX_OK && d->me == 0 && h < d->n; h++) {
            uint64_t len = d->heads[h].trace_len + d->heads[h].dfx_len, off = r * DFXH_CHUNK;

            if (d->blob[h] != NULL && off < len)
                memcpy(d->blob[h] + off, out + (size_t)h * DFXH_CHUNK,
                       (size_t)PX_MIN((uint64_t)DFXH_CHUNK, len - off));
        }
    }
    free(in);
    free(out);
    return st;
}

/* Host 0: the headers taken, each other host's slot in the merge and its blob's memory. */
static void dfxh_hosts_init(dfxh *d)
{
    for (int h = 0; h < d->n; h++) {
        dfx_merge_src *x = &d->hosts[h];
        const dfxh_head *hd = &d->heads[h];
        const comm_host *ch = comm_proxy_host(d->p, h);
        uint64_t len;

        x->index = h;
        x->pid = (int)ch->pid;
        snprintf(x->dir, sizeof(x->dir), "hosts/host%d", h);
        snprintf(x->label, sizeof(x->label), "%s", ch->id);
        x->st = hd->magic == DFXH_MAGIC ? hd->st : PX_EINVAL;
        if (x->st != PX_OK) {
            snprintf(x->msg, sizeof(x->msg), "host %d sent no DFX outputs of this run: %.440s",
                     h, hd->magic == DFXH_MAGIC ? hd->msg : "its header is not plexus's");
            continue;
        }
        x->t0_ns = hd->t0_ns;
        if (h == 0)
            continue; /* its files are in place already */
        if (__builtin_add_overflow(hd->trace_len, hd->dfx_len, &len) || len > SIZE_MAX - 1 ||
            (d->blob[h] = malloc((size_t)len + 1)) == NULL) {
            x->st = PX_ENOMEM;
            snprintf(x->msg, sizeof(x->msg), "host %d's outputs (%llu + %llu bytes) do not fit "
                     "in host 0's memory", h, (unsigned long long)hd->trace_len,
                     (unsigned long long)hd->dfx_len);
        }
    }
}

/* Host 0: the clock of every other host against its own (step 2). */
static void dfxh_clock(dfxh *d)
{
    comm_proxy_clock_est *est = calloc((size_t)d->n, sizeof(*est));
    const comm_proxy_clock_est *first = comm_proxy_clock_first(d->p);

    if (est == NULL || comm_proxy_clock(d->p, DFXH_CLOCK_ROUNDS, d->timeout_s, est) != PX_OK) {
        PX_LOG_WARN("dfx: no clock estimate of the other hosts (%s): their events keep their "
                    "own clocks' offsets", est ? px_last_error() : "out of host memory");
        free(est);
        return;
    }
    for (int h = 0; h < d->n; h++) {
        dfx_merge_src *x = &d->hosts[h];

        x->clock_ok = h == 0 || (est[h].rounds > 0);
        x->offset_ns = est[h].offset_ns;
        x->uncertainty_ns = est[h].rtt_min_ns / 2;
        x->rounds = est[h].rounds;
        x->at_ns = est[h].at_ns;
        if (h > 0 && first != NULL && first != est && first[h].rounds > 0 && est[h].rounds > 0 &&
            est[h].at_ns > first[h].at_ns + DFXH_RATE_SPAN_NS) {
            double span = (double)(est[h].at_ns - first[h].at_ns);

            x->rate = (double)(est[h].offset_ns - first[h].offset_ns) / span;
            x->rate_uncertainty = (double)(est[h].rtt_min_ns + first[h].rtt_min_ns) / 2 / span;
            x->rate_span_ns = est[h].at_ns - first[h].at_ns;
        }
        if (h > 0)
            PX_LOG_INFO("dfx: host %d's clock is host 0's %+.3f us (within %.3f us, least round "
                        "trip of %d), rate %+.3f ppm (within %.3f ppm, over %.3f s)", h,
                        (double)x->offset_ns / 1e3, (double)x->uncertainty_ns / 1e3, x->rounds,
                        x->rate * 1e6, x->rate_uncertainty * 1e6, (double)x->rate_span_ns / 1e9);
    }
    free(est);
}

/* Host 0: writes the other hosts' files and the merge; returns PX_OK, or why a host is
 * missing (the outputs are written all the same), or the merge's error. */
static px_status dfxh_merge(dfxh *d, const char *job)
{
    int lock = -1, missing = -1;
    px_status st;

    for (int h = 1; h < d->n; h++) {
        if (d->hosts[h].st == PX_OK &&
            (st = dfx_merge_files_write(job, h, d->heads[h].trace_len, d->heads[h].dfx_len,
                                        d->blob[h])) != PX_OK) {
            d->hosts[h].st = st;
            snprintf(d->hosts[h].msg, sizeof(d->hosts[h].msg), "%s", px_last_error());
        }
    }
    if ((st = util_dir_lock(job, d->timeout_s, "dfx", &lock)) != PX_OK)
        return st;
    st = dfx_merge_run(&(dfx_merge_in){.dir = job, .level = 4, .nsrc = d->n, .src = d->hosts});
    util_dir_unlock(lock);
    for (int h = 1; h < d->n && missing < 0; h++)
        if (d->hosts[h].st != PX_OK)
            missing = h;
    if (st == PX_OK && missing > 0) { /* said here too: the run's own failure may win */
        st = px_set_error(PX_EIO, "dfx: host %d (%s) is missing from the merged outputs in %s "
                          "(written without it, see hosts_missing in dfx.json): %s", missing,
                          d->hosts[missing].label, job, d->hosts[missing].msg);
        PX_LOG_WARN("%s", px_last_error());
    }
    return st;
}

/* The job's directory of host directory dir (DIR/hosts/host<h> -> DIR) into out. */
static px_status dfxh_job_dir(const char *dir, char *out, size_t n)
{
    const char *cut = strstr(dir, "/hosts/host");

    while (cut != NULL && strstr(cut + 1, "/hosts/host") != NULL)
        cut = strstr(cut + 1, "/hosts/host");
    if (cut == NULL || (size_t)(cut - dir) >= n)
        return px_set_error(PX_EINVAL, "dfx: %s is not a host's directory DIR/hosts/host<h>",
                            dir);
    memcpy(out, dir, (size_t)(cut - dir));
    out[cut - dir] = '\0';
    return PX_OK;
}

/* Frees what the gather holds. */
static void dfxh_free(dfxh *d)
{
    for (int h = 0; d->blob != NULL && h < d->n; h++)
        free(d->blob[h]);
    free(d->blob);
    free(d->hosts);
    free(d->heads);
}

/* The gather and, on host 0, the merge (steps 1 to 3 above). */
/* Notes where this host's outputs (dir) and the job's merged set are: host 0's job directory
 * from its header when the headers were gathered (heads), else none known but host 0's own. */
static void dfxh_note(const dfxh *d, const char *dir, const dfxh_head *heads)
{
    const dfxh_head *h0 = heads != NULL && heads[0].magic == DFXH_MAGIC ? &heads[0] : NULL;

    pthread_mutex_lock(&dfxh_where_lock);
    dfxh_where.valid = 1;
    dfxh_where.host = d->me;
    snprintf(dfxh_where.own, sizeof(dfxh_where.own), "%s", dir);
    snprintf(dfxh_where.merged, sizeof(dfxh_where.merged), "%.*s", (int)sizeof(h0->job) - 1,
             h0 != NULL ? h0->job : "");
    snprintf(dfxh_where.merged_by, sizeof(dfxh_where.merged_by), "%.*s",
             (int)sizeof(h0->id) - 1, h0 != NULL ? h0->id : "");
    pthread_mutex_unlock(&dfxh_where_lock);
}

px_status comm_dfx_hosts_where(int *host, char *own, size_t n, char *merged, size_t m,
                               char *merged_by, size_t k)
{
    px_status st = PX_ENOENT;

    pthread_mutex_lock(&dfxh_where_lock);
    if (dfxh_where.valid) {
        *host = dfxh_where.host;
        snprintf(own, n, "%s", dfxh_where.own);
        snprintf(merged, m, "%s", dfxh_where.merged);
        snprintf(merged_by, k, "%s", dfxh_where.merged_by);
        st = PX_OK;
    }
    pthread_mutex_unlock(&dfxh_where_lock);
    return st;
}

static px_status dfxh_run(dfxh *d, const char *job, const char *dir, const dfxh_head *me,
                          const dfx_merge_files *own)
{
    px_status st = comm_proxy_allgather(d->p, me, sizeof(*me), d->heads, d->timeout_s);

    dfxh_note(d, dir, st == PX_OK ? d->heads : d->me == 0 ? me : NULL);

    if (st != PX_OK && d->me != 0)
        return st;
    if (d->me == 0) {
        if (st != PX_OK)
            snprintf(d->why, sizeof(d->why), "the hosts' DFX gather failed: %s",
                     px_last_error());
        for (int h = 1; st != PX_OK && h < d->n; h++) {
            d->heads[h] = (dfxh_head){.magic = DFXH_MAGIC, .st = PX_ETIMEDOUT};
            snprintf(d->heads[h].msg, sizeof(d->heads[h].msg), "%.255s", d->why);
        }
        d->heads[0] = *me;
        dfxh_hosts_init(d);
        if (st != PX_OK)
            return dfxh_merge(d, job);
        dfxh_clock(d);
    }
    st = dfxh_files_gather(d, own);
    if (st != PX_OK && d->me != 0)
        return st;
    if (st != PX_OK) {
        snprintf(d->why, sizeof(d->why), "the hosts' DFX gather failed: %s", px_last_error());
        dfxh_lose_rest(d);
    }
    return d->me == 0 ? dfxh_merge(d, job) : PX_OK;
}

px_status comm_dfx_hosts_merged(comm_proxy *p, const char *dir, px_status merge_st,
                                double timeout_s)
{
    dfxh d = {.p = p, .me = comm_proxy_rank(p), .n = comm_proxy_size(p),
              .timeout_s = timeout_s};
    char job[PX_DFX_OUT_MAX];
    dfxh_head me;
    dfx_merge_files own = {0};
    px_status st;

    if ((st = dfxh_job_dir(dir, job, sizeof(job))) != PX_OK)
        return st;
    dfxh_own(dir, job, merge_st, comm_proxy_host(p, d.me)->id, &me, &own);
    px_clear_error();
    d.heads = calloc((size_t)d.n, sizeof(*d.heads));
    if (d.me == 0) {
        d.blob = calloc((size_t)d.n, sizeof(*d.blob));
        d.hosts = calloc((size_t)d.n, sizeof(*d.hosts));
    }
    if (d.heads == NULL || (d.me == 0 && (d.blob == NULL || d.hosts == NULL)))
        st = px_set_error(PX_ENOMEM, "dfx: out of host memory for the gather of %d hosts' "
                          "outputs", d.n);
    else
        st = dfxh_run(&d, job, dir, &me, &own);
    dfxh_free(&d);
    dfx_merge_files_free(&own);
    return st;
}
