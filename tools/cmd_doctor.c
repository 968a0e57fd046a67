/*
 * cmd_doctor.c - `plexus doctor`: what this machine and device profile allow, and why.
 *
 * Prints the capability table (px_caps_print), then a "paths" section derived only from the
 * effective facts: host mapping of device memory with ordinary pages, with huge pages, and
 * peer mapping between chips, each "available" or "refused: <the fact's note>" (huge pages
 * also need free pages, which the effective flag leaves to allocation time), then the DFX
 * transport each collector would use, from the selection code itself (cmd_doctor_dfx.c;
 * doctor never re-derives a policy of its own). --json prints the same as one JSON document,
 * version 1 ("paths" gains a "dfx" member); --config prints the PLEXUS_* knob table instead;
 * --comm prints the comm transport of each pair of a domain's ranks instead
 * (cmd_doctor_comm.c), and the report itself only a one-line hint at it.
 */
#include "cli.h"

#include <string.h>

#include "caps/caps_internal.h"
#include "util/tl_list.h"
#include "mpi/mpi_load.h"

typedef struct doctor_path {
    const char *key;   /* JSON name */
    const char *label; /* text label */
    px_fact_id fact;   /* effective fact that decides it */
} doctor_path;

/* Rows of doctor_paths[], in print order. */
enum { DOCTOR_HOST_MAP, DOCTOR_HOST_MAP_HUGE, DOCTOR_PEER_MAP };

static const doctor_path doctor_paths[] = {
    {"host_map", "host mapping, ordinary pages", PX_FACT_HOST_MAP_EFFECTIVE},
    {"host_map_huge", "host mapping, huge pages", PX_FACT_HOST_MAP_HUGE_EFFECTIVE},
    {"peer_map", "peer mapping between chips", PX_FACT_PEER_MAP_EFFECTIVE},
};

#define DOCTOR_NPATHS (sizeof(doctor_paths) / sizeof(doctor_paths[0]))

/*
 * Returns 1 when path p is available, else 0 with the reason in why: the effective fact's
 * note (or its value and source), or for huge pages with the flag set, the lack of free pages
 * (the flag says the device allows it; the pages are only checked at allocation).
 */
static int doctor_path_ok(const px_caps *caps, const doctor_path *p, char *why, size_t n)
{
    const px_fact *f = &caps->f[p->fact];
    int64_t free_pages = px_caps_get(caps, PX_FACT_HUGE_PAGES_FREE);

    why[0] = '\0';
    if (!px_caps_get(caps, p->fact)) {
        if (f->note[0] != '\0')
            snprintf(why, n, "%s", f->note);
        else
            snprintf(why, n, "%s = 0 (source %s)", px_fact_name(p->fact),
                     px_fact_source_name((px_fact_source)f->source));
        return 0;
    }
    if (p->fact == PX_FACT_HOST_MAP_HUGE_EFFECTIVE && free_pages <= 0) {
        snprintf(why, n,
                 "the device allows it but no huge pages are free (huge_pages_free %lld, "
                 "huge_pages_reserved %lld); reserve some with `echo N > "
                 "/proc/sys/vm/nr_hugepages`",
                 (long long)free_pages, (long long)px_caps_get(caps, PX_FACT_HUGE_PAGES_RESERVED));
        return 0;
    }
    return 1;
}

static void doctor_print_paths(const px_caps *caps)
{
    char why[PX_FACT_NOTE_MAX + 64];

    printf("\npaths (from the effective facts):\n");
    for (size_t i = 0; i < DOCTOR_NPATHS; i++) {
        const doctor_path *p = &doctor_paths[i];

        if (doctor_path_ok(caps, p, why, sizeof(why)))
            printf("  %-30s available\n", p->label);
        else
            printf("  %-30s refused: %s\n", p->label, why);
    }
}

/* Writes the "paths" object of the JSON document. Returns PX_OK or PX_EIO. */
static px_status doctor_json_paths(const px_caps *caps, const px_config *c, FILE *f)
{
    char why[PX_FACT_NOTE_MAX + 64];
    px_status st = PX_OK;

    fprintf(f, "{\n");
    for (size_t i = 0; i < DOCTOR_NPATHS && st == PX_OK; i++) {
        const doctor_path *p = &doctor_paths[i];
        int ok = doctor_path_ok(caps, p, why, sizeof(why));

        fprintf(f, "    \"%s\": {\"available\": %s, \"fact\": \"%s\", \"note\": ", p->key,
                ok ? "true" : "false", px_fact_name(p->fact));
        st = px_caps_json_string(f, why);
        fprintf(f, "},\n");
    }
    fprintf(f, "    \"dfx\": ");
    if (st == PX_OK)
        st = doctor_dfx_json(caps, c, f);
    fprintf(f, "\n  }");
    return st;
}

/* Several hosts: whether a level-3 worker would run under MPI, and its plugin. */
static void doctor_mpi_print(const px_config *c)
{
    px_mpi_info m;

    px_mpi_describe(c->comm_transport == PX_COMM_TL_MPI, &m);
    printf("\nMPI (several hosts, the mpi comm transport):\n");
    printf("  %-30s %s (%s)\n", "a level-3 worker", m.wanted ? "runs under MPI" :
           "runs alone", m.why);
    if (m.loaded)
        printf("  %-30s %s (%s)\n", "plugin", m.path, m.library);
    else
        printf("  %-30s not loadable: %s\n", "plugin", m.error);
}

/* The "mpi" member of the JSON document. */
static px_status doctor_mpi_json(const px_config *c, FILE *f)
{
    px_mpi_info m;
    px_status st;

    px_mpi_describe(c->comm_transport == PX_COMM_TL_MPI, &m);
    fprintf(f, "{\"wanted\": %s, \"why\": ", m.wanted ? "true" : "false");
    st = px_caps_json_string(f, m.why);
    fprintf(f, ", \"plugin\": ");
    if (st == PX_OK && m.loaded)
        st = px_caps_json_string(f, m.path);
    else
        fputs("null", f);
    fprintf(f, ", \"library\": ");
    if (st == PX_OK && m.loaded)
        st = px_caps_json_string(f, m.library);
    else
        fputs("null", f);
    fprintf(f, ", \"error\": ");
    if (st == PX_OK && !m.loaded)
        st = px_caps_json_string(f, m.error);
    else
        fputs("null", f);
    fputc('}', f);
    return st;
}

static int doctor_json(const px_caps *caps, const px_config *c)
{
    px_status st;

    printf("{\n  \"version\": 1,\n  \"facts\": ");
    st = px_caps_write_json_facts(caps, stdout, 2);
    if (st == PX_OK) {
        printf(",\n  \"paths\": ");
        st = doctor_json_paths(caps, c, stdout);
    }
    if (st == PX_OK) {
        printf(",\n  \"mpi\": ");
        st = doctor_mpi_json(c, stdout);
    }
    printf("\n}\n");
    if (st != PX_OK || fflush(stdout) != 0 || ferror(stdout))
        return cli_fail("doctor: writing the JSON document to stdout failed");
    return 0;
}

/*
 * --comm replaces the report and takes --chips and --comm-transport, which mean nothing
 * without it; the DFX options and --config mean nothing with it. Returns 0, or -1 with the
 * option and why in why.
 */
static int doctor_check_comm_opts(const cli_opts *o, char *why, size_t n)
{
    static const struct {
        unsigned bit;
        const char *name;
    } only_comm[] = {{CLI_OPT_CHIPS, "--chips"}, {CLI_OPT_COMM_TRANSPORT, "--comm-transport"}},
      not_comm[] = {{CLI_OPT_CONFIG, "--config"}, {CLI_OPT_DFX, "--dfx"},
                    {CLI_OPT_DFX_TRANSPORT, "--dfx-transport"}};
    int comm = (o->given & CLI_OPT_COMM) != 0;

    for (size_t i = 0; i < sizeof(only_comm) / sizeof(only_comm[0]) && !comm; i++) {
        if (o->given & only_comm[i].bit) {
            snprintf(why, n, "doctor: option %s applies only with --comm (the comm transports "
                     "of a domain of chips 0..N-1)", only_comm[i].name);
            return -1;
        }
    }
    for (size_t i = 0; i < sizeof(not_comm) / sizeof(not_comm[0]) && comm; i++) {
        if (o->given & not_comm[i].bit) {
            snprintf(why, n, "doctor: --comm and %s cannot be combined; run `plexus doctor "
                     "%s` on its own", not_comm[i].name, not_comm[i].name);
            return -1;
        }
    }
    return 0;
}

int cli_cmd_doctor(const cli_opts *o)
{
    char why[CLI_WHY_MAX], buf[CLI_WHY_MAX];
    px_config c;
    px_caps caps;
    px_status st;

    if ((o->given & CLI_OPT_JSON) && (o->given & CLI_OPT_CONFIG))
        return cli_fail("doctor: --json and --config cannot be combined; the knob table "
                        "has a text form only");
    if (doctor_check_comm_opts(o, why, sizeof(why)) != 0)
        return cli_fail("%s", why);
    if (cli_config(o, &c, why, sizeof(why)) != 0)
        return cli_fail("%s", why);
    if (o->given & CLI_OPT_CONFIG) {
        px_config_print(&c, stdout);
        return 0;
    }
    st = px_caps_probe_with(&c, &caps);
    if (st != PX_OK)
        return cli_fail("doctor: %s", cli_status_text(st, buf, sizeof(buf)));
    if (o->given & CLI_OPT_COMM)
        return doctor_comm(o, &caps, &c);
    if (o->given & CLI_OPT_JSON)
        return doctor_json(&caps, &c);
    printf("capabilities (device profile %s):\n", c.device_profile);
    px_caps_print(&caps, stdout);
    doctor_print_paths(&caps);
    doctor_dfx_print(&caps, &c);
    doctor_mpi_print(&c);
    printf("\ncomm transports: `plexus doctor --comm [--chips N]` shows each pair of chips' "
           "transport and why\n");
    return 0;
}
