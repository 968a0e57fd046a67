/*
 * cmd_trace.c - `plexus trace summary DIR`: what a DFX output directory says about its run.
 *
 * Reads the directory back into the same task model as report.html (trace.json and/or
 * deps.json through trace_load.c, with plexus's JSON reader; src/dfx/collectors/model.h) and prints
 * the task and edge counts, one line per
 * kernel (count, total, mean and max time), the critical path, then the transport table of
 * dfx.json (written by the DFX framework): per collector its transport, the counts and every
 * refused transport with its reason. Ends with PASS, or FAIL: <reason> when the directory has
 * no dfx.json or a file does not parse.
 */
#include "cli.h"

#include <string.h>
#include <unistd.h>

#include "dfx/collectors/model.h"
#include "trace_load.h"

#define TRACE_CP_SHOWN 16

/* Prints a duration in ns as microseconds with three decimals, right-aligned in w. */
static void trace_us(int64_t ns, int w)
{
    printf(" %*lld.%03lld", w - 4, (long long)(ns / 1000), (long long)(ns % 1000));
}

/* Prints the kernel table and the critical path of m. */
static void trace_print_model(const dfxc_model *m)
{
    printf("tasks %zu, edges %zu (from %s%s%s; clock %s)\n", m->n, m->edges.n,
           m->has_trace ? "trace.json" : "", m->has_trace && m->has_deps ? " and " : "",
           m->has_deps ? "deps.json" : "", m->clock);
    printf("%-32s %8s %12s %12s %12s\n", "kernel", "count", "total_us", "mean_us", "max_us");
    for (size_t i = 0; i < m->nk; i++) {
        const dfxc_mkernel *k = &m->k[i];

        printf("%-32s %8llu", k->name, (unsigned long long)k->count);
        trace_us(k->total, 12);
        trace_us(k->timed ? k->total / (int64_t)k->timed : 0, 12);
        trace_us(k->max, 12);
        printf("\n");
    }
    printf("critical path: %zu tasks, ", m->ncp);
    if (m->cp_by_count)
        printf("by task count (no timing):");
    else
        printf("%lld.%03lld us:", (long long)(m->cp_len / 1000), (long long)(m->cp_len % 1000));
    for (size_t i = 0; i < m->ncp && i < TRACE_CP_SHOWN; i++) { /* task@pid past pid 0 */
        unsigned long long id = m->cp[i] & ((1ull << 40) - 1), pid = m->cp[i] >> 40;

        if (pid != 0)
            printf(" %llu@%llu", id, pid);
        else
            printf(" %llu", id);
    }
    printf("%s\n", m->ncp > TRACE_CP_SHOWN ? " ..." : "");
}

int cli_cmd_trace(const cli_opts *o)
{
    char path[4096], buf[CLI_WHY_MAX];
    const char *dir = o->pos[1];
    dfxc_model m;
    px_status st;

    if (strcmp(o->pos[0], "summary") != 0)
        return cli_fail("unknown trace command \"%s\"; use `plexus trace summary DIR`", o->pos[0]);
    snprintf(path, sizeof(path), "%s/dfx.json", dir);
    if (access(path, F_OK) != 0)
        return cli_fail("%s has no dfx.json: not a DFX output directory (write one with "
                        "`plexus run EXAMPLE --dfx all --out %s`)",
                        dir, dir);
    st = trace_load_dir(dir, &m);
    if (st != PX_OK) {
        dfxc_model_free(&m);
        return cli_fail("%s", cli_status_text(st, buf, sizeof(buf)));
    }
    printf("trace summary of %s\n", dir);
    if (m.has_trace || m.has_deps)
        trace_print_model(&m);
    else
        printf("no trace.json or deps.json: swimlane, hosttrace and depgen were off\n");
    dfxc_model_free(&m);
    st = trace_print_dfx(dir);
    if (st != PX_OK)
        return cli_fail("%s", cli_status_text(st, buf, sizeof(buf)));
    printf("PASS\n");
    return 0;
}
