/*
 * cmd_doctor_comm.c - `plexus doctor --comm`: the comm transport each pair of ranks of a
 * domain of chips 0..N-1 would use and why, every transport's verdict with its reason, and
 * for a pair with none the error px_domain_alloc would return.
 *
 * It calls the rule px_domain_alloc applies (comm_choose, src/comm/select.c) on the probed
 * facts, under the configuration's device profile and PLEXUS_COMM_TRANSPORT (or
 * --comm-transport); it never re-derives a policy, so its words are the log's
 * (`comm[tp]: rank 0 -> rank 3 via staged (peer_map=0 in profile a2a3-pcie)`). It explains
 * and exits 0, also where a domain of these chips would fail. Rank r is chip r here.
 */
#include "cli.h"

#include <stdlib.h>
#include <string.h>

#include "caps/caps_internal.h"
#include "comm/proxy.h"
#include "comm/select.h"
#include "mpi/mpi_load.h"

#define DOCTOR_COMM_DEFAULT_CHIPS 4
#define DOCTOR_COMM_ERR_MAX 768

/* The domain shown: --chips N, else PLEXUS_CHIPS when it is set, else 4 chips. */
static int doctor_comm_chips(const cli_opts *o, const px_config *c)
{
    const char *env = getenv("PLEXUS_CHIPS");

    if ((o->given & CLI_OPT_CHIPS) || (env != NULL && env[0] != '\0'))
        return c->chips;
    return DOCTOR_COMM_DEFAULT_CHIPS;
}

/*
 * The domain shown: chips 0..N-1 of this host; under MPI (started by mpirun, the plugin
 * loading) the chips of every host of the job, host-major (rank = host * N + chip), with the
 * hosts' facts exchanged through an MPI proxy as a worker's would be. Doctor starts a proxy
 * of its own for that (no chips), prints on host 0 only, and stops it.
 */
typedef struct doctor_view {
    int chips, hosts, n;
    comm_proxy *proxy;
    px_mpi_info m;
    comm_bell bell;
} doctor_view;

static doctor_view g_view;

/* The site and the facts of ranks a and b, as comm_select would see them. */
static const px_caps *doctor_comm_pair(const doctor_view *v, const px_caps *caps, int a, int b,
                                       comm_site *s)
{
    int ha = a / v->chips, hb = b / v->chips;

    *s = (comm_site){.mpi = v->m.wanted && v->m.loaded, .no_mpi = v->m.wanted ? v->m.error
                                                                              : v->m.why,
                     .ha = ha, .hb = hb};
    if (v->proxy == NULL)
        return caps;
    s->ida = comm_proxy_host(v->proxy, ha)->id;
    s->idb = comm_proxy_host(v->proxy, hb)->id;
    return ha == hb && ha != comm_proxy_rank(v->proxy) ? &comm_proxy_host(v->proxy, ha)->caps
                                                       : caps;
}

static void doctor_comm_choose(const doctor_view *v, const px_caps *caps, const px_config *c,
                               int a, int b, comm_choice *ch)
{
    comm_site site;
    const px_caps *f = doctor_comm_pair(v, caps, a, b, &site);

    comm_choose_at(f, &site, c->comm_transport, 0, a % v->chips, b % v->chips, ch);
}

/* "auto", or the forced transport's name. */
static const char *doctor_comm_forced(const px_config *c)
{
    return c->comm_transport == PX_COMM_TL_AUTO ? "auto" : comm_tl_name(c->comm_transport);
}

/* Prints one pair: the log line's shape, then every other verdict; for none, the error. */
static void doctor_comm_print_pair(const comm_choice *ch, int a, int b, int forced)
{
    char err[DOCTOR_COMM_ERR_MAX];
    int refused = 0, also = 0;

    printf("  rank %d -> rank %d via %s", a, b, comm_tl_name(ch->tl));
    if (ch->tl != PX_COMM_TL_NONE)
        printf(" (%s)", comm_choice_reason(ch));
    for (int t = PX_COMM_TL_DIRECT; t < PX_COMM_TL_COUNT; t++)
        if (!ch->accepts[t])
            printf("%s%s (%s)", refused++ ? ", " : "; refused: ", comm_tl_name(t), ch->why[t]);
    for (int t = PX_COMM_TL_DIRECT; t < PX_COMM_TL_COUNT; t++)
        if (ch->accepts[t] && t != ch->tl)
            printf("%s%s (%s)", also++ ? ", " : "; also accepts: ", comm_tl_name(t),
                   ch->why[t]);
    printf("\n");
    if (ch->tl == PX_COMM_TL_NONE)
        printf("    px_domain_alloc fails (PX_ENOTSUP): %s\n",
               comm_choice_error(ch, forced, 0, err, sizeof(err)));
}

/* Prints "4 chips: 2 pairs direct, 4 staged" from counts (index PX_COMM_TL_NONE: none). */
static void doctor_comm_print_summary(int n, const int counts[PX_COMM_TL_COUNT])
{
    int first = 1;

    printf("  %d chip%s: ", n, n == 1 ? "" : "s");
    if (n < 2) {
        printf("no pairs (one rank reaches only its own window)\n");
        return;
    }
    for (int k = 1; k <= PX_COMM_TL_COUNT; k++) {
        int t = k % PX_COMM_TL_COUNT; /* direct, staged, ..., then none */

        if (counts[t] == 0)
            continue;
        printf("%s%d%s %s", first ? "" : ", ", counts[t],
               first ? (counts[t] == 1 ? " pair" : " pairs") : "",
               t == PX_COMM_TL_NONE ? "with no transport" : comm_tl_name(t));
        first = 0;
    }
    if (counts[PX_COMM_TL_NONE] > 0)
        printf("; px_domain_alloc of these chips fails with PX_ENOTSUP");
    printf("\n");
}

/* The text report: a header, one line per pair (and the error of a pair with none), the
 * summary. */
static void doctor_comm_text(const px_caps *caps, const px_config *c, int n)
{
    int counts[PX_COMM_TL_COUNT] = {0};
    comm_choice ch;

    if (g_view.hosts > 1)
        printf("comm transports (device profile %s, PLEXUS_COMM_TRANSPORT %s; a domain of %d "
               "hosts x chips 0..%d, rank r on chip r %% %d of host r / %d; selection code of "
               "px_domain_alloc):\n", c->device_profile, doctor_comm_forced(c), g_view.hosts,
               g_view.chips - 1, g_view.chips, g_view.chips);
    else
        printf("comm transports (device profile %s, PLEXUS_COMM_TRANSPORT %s; a domain of chips "
               "0..%d, rank r on chip r; selection code of px_domain_alloc):\n",
               c->device_profile, doctor_comm_forced(c), n - 1);
    for (int a = 0; a < n; a++) {
        for (int b = a + 1; b < n; b++) {
            doctor_comm_choose(&g_view, caps, c, a, b, &ch);
            counts[ch.tl]++;
            doctor_comm_print_pair(&ch, a, b, c->comm_transport);
        }
    }
    doctor_comm_print_summary(n, counts);
}

/* Writes one pair's JSON object. Returns PX_OK or PX_EIO. */
static px_status doctor_comm_json_pair(const comm_choice *ch, int a, int b, int forced, FILE *f)
{
    char err[DOCTOR_COMM_ERR_MAX];
    px_status st;

    if (ch->tl == PX_COMM_TL_NONE)
        fprintf(f, "{\"a\": %d, \"b\": %d, \"transport\": null, \"why\": ", a, b);
    else
        fprintf(f, "{\"a\": %d, \"b\": %d, \"transport\": \"%s\", \"why\": ", a, b,
                comm_tl_name(ch->tl));
    st = px_caps_json_string(f, comm_choice_reason(ch));
    fputs(", \"verdicts\": [", f);
    for (int t = PX_COMM_TL_DIRECT; t < PX_COMM_TL_COUNT && st == PX_OK; t++) {
        fprintf(f, "%s{\"transport\": \"%s\", \"accepts\": %s, \"why\": ",
                t > PX_COMM_TL_DIRECT ? ", " : "", comm_tl_name(t),
                ch->accepts[t] ? "true" : "false");
        st = px_caps_json_string(f, ch->why[t]);
        fputc('}', f);
    }
    fputs("], \"error\": ", f);
    if (st == PX_OK && ch->tl == PX_COMM_TL_NONE)
        st = px_caps_json_string(f, comm_choice_error(ch, forced, 0, err, sizeof(err)));
    else
        fputs("null", f);
    fputc('}', f);
    return st;
}

/* The JSON document, version 1 (docs/formats.md, "doctor --comm --json"). */
static int doctor_comm_json(const px_caps *caps, const px_config *c, int n)
{
    int counts[PX_COMM_TL_COUNT] = {0};
    px_status st;
    comm_choice ch;

    printf("{\n  \"version\": 1,\n  \"comm\": {\n    \"device_profile\": ");
    st = px_caps_json_string(stdout, c->device_profile);
    printf(",\n    \"forced\": \"%s\",\n    \"hosts\": %d,\n    \"chips\": %d,\n    "
           "\"pairs\": [", doctor_comm_forced(c), g_view.hosts, n);
    for (int a = 0; a < n && st == PX_OK; a++) {
        for (int b = a + 1; b < n && st == PX_OK; b++) {
            doctor_comm_choose(&g_view, caps, c, a, b, &ch);
            counts[ch.tl]++;
            printf("%s\n      ", a == 0 && b == 1 ? "" : ",");
            st = doctor_comm_json_pair(&ch, a, b, c->comm_transport, stdout);
        }
    }
    printf("%s],\n    \"counts\": {", n > 1 ? "\n    " : "");
    for (int t = PX_COMM_TL_DIRECT; t < PX_COMM_TL_COUNT; t++)
        printf("\"%s\": %d, ", comm_tl_name(t), counts[t]);
    printf("\"none\": %d},\n    \"ok\": %s\n  }\n}\n", counts[PX_COMM_TL_NONE],
           counts[PX_COMM_TL_NONE] == 0 ? "true" : "false");
    if (st != PX_OK || fflush(stdout) != 0 || ferror(stdout))
        return cli_fail("doctor --comm: writing the JSON document to stdout failed");
    return 0;
}

int doctor_comm(const cli_opts *o, const px_caps *caps, const px_config *c)
{
    doctor_view *v = &g_view;
    int n = doctor_comm_chips(o, c), rc = 0;
    const px_mpi_ops *ops;
    comm_job_facts job;
    px_status st;

    v->chips = n;
    v->hosts = 1;
    px_mpi_describe(c->comm_transport == PX_COMM_TL_MPI, &v->m);
    /* under a launcher: the hosts of the job, as a worker would learn them */
    if (v->m.wanted && v->m.loaded && px_mpi_mode() != PX_MPI_ON &&
        getenv("OMPI_COMM_WORLD_SIZE") != NULL && px_mpi_load(&ops, NULL, 0) == PX_OK) {
        comm_job_facts_fill(c, 3, &job); /* it meets the hosts as a level-3 worker would */
        if ((st = comm_proxy_start(ops, caps, &job, n, &v->bell, NULL, NULL, c->timeout_s,
                                   &v->proxy)) != PX_OK)
            return cli_fail("doctor --comm: %s", px_last_error());
        v->hosts = comm_proxy_size(v->proxy);
        n *= v->hosts;
    }
    v->n = n;
    if (n > PX_COMM_MAX_RANKS)
        rc = cli_fail("doctor --comm: %d chips: a domain has at most %d ranks; use --chips "
                      "1..%d", n, PX_COMM_MAX_RANKS, PX_COMM_MAX_RANKS / v->hosts);
    else if (v->proxy != NULL && comm_proxy_rank(v->proxy) != 0)
        rc = 0; /* host 0 prints the job's table */
    else if (o->given & CLI_OPT_JSON)
        rc = doctor_comm_json(caps, c, n);
    else
        doctor_comm_text(caps, c, n);
    comm_proxy_stop(v->proxy);
    v->proxy = NULL;
    return rc;
}
