/*
 * job_start.c - the hosts of an MPI job first meet (job_start.h): each worker's record
 * (comm_host: host id, chips, pid, probe, and what must agree) is allgathered once, and every
 * host compares the same records the same way, so a difference is refused on every host
 * alike, within the exchange, instead of surfacing later as a wait that blames "a host is
 * gone". What must agree:
 *   - the proxies' wire version and the plexus version (messages differ between builds);
 *   - the worker's level: a level-2 worker under mpirun never starts MPI, so the level-3
 *     ranks would wait for it in MPI startup; here it joins the exchange saying "level 2";
 *   - PLEXUS_COMM_TRANSPORT (one transport rule for a domain spanning hosts),
 *     PLEXUS_COMM_ONESHOT_MAX (each host's members pick an allreduce's algorithm by it: two
 *     picks never meet), PLEXUS_COMM_TIMEOUT_S (one deadline for a spanning domain's waits:
 *     a host with a shorter one blames a live host), PLEXUS_DFX (host 0 gathers every host's
 *     DFX output after each run: a host without DFX never joins, one with other collectors
 *     sends other files).
 * What may differ: the chips per host (domains may be uneven), the device profile (the rule
 * runs on the hosts' facts), PLEXUS_TIMEOUT_S and the DFX output directory (each host writes
 * under its own; host 0 writes the merged set into its own).
 */
#include "comm/job_start.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <plexus/plexus.h>

#include "comm/proxy.h"
#include "mpi/mpi_load.h"
#include "mpi/mpi_ops.h"
#include "runtime/runtime.h"
#include "util/abi.h"
#include "util/clock.h"
#include "util/log.h"

/* The knobs compared, in the order of comm_job_facts.val, with why they must agree. */
static const struct {
    const char *name;
    const char *why;
} comm_job_knobs[COMM_JOB_KNOBS] = {
    {"PLEXUS_COMM_TRANSPORT", "every host applies one transport rule to a domain spanning "
                              "hosts"},
    {"PLEXUS_COMM_ONESHOT_MAX", "each host's members pick an allreduce's algorithm by it, "
                                "and two picks never meet"},
    {"PLEXUS_COMM_TIMEOUT_S", "a domain spanning hosts waits by one deadline (a host with a "
                              "shorter one blames a live host)"},
    {"PLEXUS_DFX", "host 0 gathers every host's DFX output after each run, and a host "
                   "without those collectors never sends it; --out may differ: each host "
                   "writes under its own"},
};

void comm_job_facts_fill(const px_config *c, int level, comm_job_facts *f)
{
    memset(f, 0, sizeof(*f));
    f->wire = COMM_JOB_WIRE;
    f->level = level;
    snprintf(f->version, sizeof(f->version), "%s", PX_VERSION_STRING);
    for (int i = 0; i < COMM_JOB_KNOBS; i++)
        if (util_config_format(c, comm_job_knobs[i].name, f->val[i], sizeof(f->val[i])) != PX_OK)
            snprintf(f->val[i], sizeof(f->val[i]), "?");
}

/* "host 1 (id b, pid 42)" */
static void comm_job_host_name(const comm_host *hosts, int h, char *buf, size_t n)
{
    snprintf(buf, n, "host %d (id %s, pid %d)", h, hosts[h].id, (int)hosts[h].pid);
}

/* Appends "; " (after the first) and "<field> <a> vs <b> (<why>)" to buf (used: its length
 * so far). */
static void comm_job_add(char *buf, size_t n, size_t *used, const char *field, const char *a,
                         const char *b, const char *why)
{
    int k;

    if (*used >= n)
        return;
    k = snprintf(buf + *used, n - *used, "%s%s %s vs %s (%s)", *used ? "; " : "", field, a, b,
                 why);
    *used += k > 0 ? (size_t)k : 0;
}

/* Every field in which host h's facts differ from host 0's, into buf. Returns 0 when none, 1
 * when the version or level differs (what to do is said), 2 when only knobs differ. */
static int comm_job_diff(const comm_host *hosts, int h, char *buf, size_t n)
{
    const comm_job_facts *a = &hosts[0].job, *b = &hosts[h].job;
    char va[32], vb[32];
    size_t used = 0;

    buf[0] = '\0';
    if (a->wire != b->wire || strncmp(a->version, b->version, sizeof(a->version)) != 0) {
        snprintf(va, sizeof(va), "%.15s (wire %u)", a->version, a->wire);
        snprintf(vb, sizeof(vb), "%.15s (wire %u)", b->version, b->wire);
        comm_job_add(buf, n, &used, "plexus version", va, vb, "the proxies' messages differ "
                     "between builds: run one plexus build on every host");
        return 1;
    }
    if (a->level != b->level) {
        snprintf(va, sizeof(va), "%d", a->level);
        snprintf(vb, sizeof(vb), "%d", b->level);
        comm_job_add(buf, n, &used, "worker level", va, vb, "a level-2 worker (one chip, no "
                     "domains) takes no part in the job while the level-3 ones wait for it in "
                     "MPI's start: run every rank at level 3 (plexus run --chips N), or a "
                     "level-2 run outside mpirun or with PLEXUS_MPI=off");
        return 1; /* the knobs of a level-2 worker do not matter */
    }
    if (a->level != 3)
        return 0; /* level-2 workers under one launcher: each runs on its own */
    for (int i = 0; i < COMM_JOB_KNOBS; i++)
        if (strncmp(a->val[i], b->val[i], COMM_JOB_VAL_MAX) != 0)
            comm_job_add(buf, n, &used, comm_job_knobs[i].name, a->val[i], b->val[i],
                         comm_job_knobs[i].why);
    return used > 0 ? 2 : 0;
}

px_status comm_job_facts_agree(const comm_host *hosts, int n)
{
    char diff[PX_ERRMSG_MAX / 2], h0[COMM_HOST_ID_MAX + 48], hh[COMM_HOST_ID_MAX + 48];

    for (int h = 1; h < n; h++) {
        int k = comm_job_diff(hosts, h, diff, sizeof(diff));

        if (k == 0)
            continue;
        comm_job_host_name(hosts, 0, h0, sizeof(h0));
        comm_job_host_name(hosts, h, hh, sizeof(hh));
        return px_set_error(PX_EINVAL, "the hosts of this MPI job differ in what must be "
                            "alike, %s vs %s: %s%s", h0, hh, diff, k == 2 ? "; set each alike "
                            "on every rank (the same options, or mpirun -x VAR)" : "");
    }
    return PX_OK;
}

/*
 * MPI left up by a start the hosts refused, finalised at the process's exit: MPI_Finalize
 * waits for every rank, so no rank leaves (and makes mpirun end the job) before every rank
 * has said why it failed. Bounded: a rank that never comes leaves the exit to mpirun.
 */
static const px_mpi_ops *g_job_refused;
static pid_t g_job_refused_pid;

static void *comm_job_finalize_cb(void *arg)
{
    (void)((const px_mpi_ops *)arg)->finalize();
    return NULL;
}

void comm_job_finalize_deferred(void)
{
    struct timespec until;
    pthread_t t;

    if (g_job_refused == NULL || getpid() != g_job_refused_pid)
        return;
    if (pthread_create(&t, NULL, comm_job_finalize_cb, (void *)g_job_refused) != 0)
        return;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += COMM_JOB_FINALIZE_S;
    if (pthread_timedjoin_np(t, NULL, &until) != 0)
        pthread_detach(t); /* another rank is gone or stuck: mpirun ends the job */
    g_job_refused = NULL;
}

void comm_job_finalize_at_exit(const px_mpi_ops *ops)
{
    if (g_job_refused_pid == 0)
        atexit(comm_job_finalize_deferred);
    g_job_refused = ops;
    g_job_refused_pid = getpid();
}

px_status comm_job_exchange(const px_mpi_ops *ops, const comm_host *me, comm_host *hosts,
                            int size, double timeout_s, int *met)
{
    px_mpi_req *r = NULL;
    char s[256];
    uint64_t until;
    int e, done = 0;

    *met = 0;
    if ((e = ops->iallgather(me, hosts, sizeof(*me), &r)) != 0) {
        ops->error(e, s, sizeof(s));
        return px_set_error(PX_EIO, "MPI_Iallgather of the hosts failed: %s", s);
    }
    until = px_now_ns() + (uint64_t)(timeout_s * 1e9);
    while ((e = ops->test(r, &done)) == 0 && !done) {
        struct timespec ts = {0, 50000};

        if (px_now_ns() > until) {
            ops->cancel(r);
            return px_set_error(PX_ETIMEDOUT, "the %d workers of the MPI job did not all "
                                "tell their hosts within %g s (PLEXUS_TIMEOUT_S): a worker "
                                "did not start or is stuck", size, timeout_s);
        }
        nanosleep(&ts, NULL);
    }
    if (e != 0) {
        ops->error(e, s, sizeof(s));
        return px_set_error(PX_EIO, "MPI_Iallgather of the hosts failed (a rank of another "
                            "plexus build sends another record size?): %s", s);
    }
    *met = 1;
    for (int h = 0; h < size; h++)
        hosts[h].id[COMM_HOST_ID_MAX - 1] = '\0';
    return comm_job_facts_agree(hosts, size);
}

/* The launcher's world size (1 when not started by one, or it does not say). */
static int comm_job_launched_size(void)
{
    static const char *const vars[] = {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE"};

    for (size_t i = 0; i < sizeof(vars) / sizeof(vars[0]); i++) {
        const char *v = getenv(vars[i]);

        if (v != NULL && v[0] >= '1' && v[0] <= '9')
            return atoi(v);
    }
    return 1;
}

/* MPI up on this thread, the start exchange as level 2, MPI down. */
static px_status comm_job_level2_meet(const px_mpi_ops *ops, const px_config *c,
                                      const px_caps *caps)
{
    comm_host me, *hosts = NULL;
    int rank = 0, size = 0, met = 0, e;
    char s[256];
    px_status st;

    if ((e = ops->init(&rank, &size)) != 0) {
        ops->error(e, s, sizeof(s));
        return px_set_error(PX_EIO, "px_worker_init: a level-2 worker started by an MPI "
                            "launcher tells the other ranks its level, but MPI_Init_thread "
                            "failed: %s (PLEXUS_MPI=off: no MPI at level 2)", s);
    }
    px_mpi_state_set(PX_MPI_STATE_UP);
    memset(&me, 0, sizeof(me));
    snprintf(me.id, sizeof(me.id), "%s", caps->f[PX_FACT_HOST_ID].text);
    me.chips = 1;
    me.pid = (int32_t)getpid();
    me.caps = *caps;
    comm_job_facts_fill(c, 2, &me.job);
    if ((hosts = calloc((size_t)size, sizeof(*hosts))) == NULL)
        st = px_set_error(PX_ENOMEM, "out of host memory for %d hosts", size);
    else
        st = comm_job_exchange(ops, &me, hosts, size, c->timeout_s, &met);
    if (st != PX_OK) {
        char msg[PX_ERRMSG_MAX];

        snprintf(msg, sizeof(msg), "%s", px_last_error());
        px_set_error(st, "px_worker_init: this level-2 worker is rank %d of %d of an MPI job: "
                     "%s", rank, size, msg);
    } else {
        PX_LOG_INFO("mpi: rank %d of %d: every rank of the job is a level-2 worker; each runs "
                    "on its own", rank, size);
    }
    free(hosts);
    if (met && st == PX_OK) { /* every rank is level 2: MPI ends here, alike everywhere */
        (void)ops->finalize();
        px_mpi_state_set(PX_MPI_STATE_DONE);
    } else if (met) {
        comm_job_finalize_at_exit(ops); /* after this rank has said why */
    } /* (else a rank did not come: mpirun ends the job) */
    return st;
}

px_status comm_job_level2_check(const px_config *c, const void *caps)
{
    const px_mpi_ops *ops;
    char why[160];

    if (!px_mpi_wanted(0, why, sizeof(why)) || comm_job_launched_size() <= 1 ||
        px_mpi_state() != PX_MPI_STATE_NONE)
        return PX_OK;
    if (px_mpi_load(&ops, NULL, 0) != PX_OK) {
        PX_LOG_WARN("a level-2 worker started by an MPI launcher (%s) cannot tell the other "
                    "ranks its level: %s", why, px_last_error());
        return PX_OK;
    }
    if (ops->initialized())
        return PX_OK; /* the program runs MPI itself */
    return comm_job_level2_meet(ops, c, caps);
}
