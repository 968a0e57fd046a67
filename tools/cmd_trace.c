/*
 * cmd_trace.c - `plexus trace summary DIR`: what a DFX output directory says about its run.
 *
 * Reads the directory back with the same task model as report.html (trace.json and/or
 * deps.json, src/dfx/collectors/model.h) and prints the task and edge counts, one line per
 * kernel (count, total, mean and max time), the critical path, then the transport table of
 * dfx.json (written by the DFX framework): per collector its transport, the counts and every
 * refused transport with its reason. Ends with PASS, or FAIL: <reason> when the directory has
 * no dfx.json or a file does not parse.
 */
#include "cli.h"

#include <string.h>

#include "dfx/collectors/json.h"
#include "dfx/collectors/model.h"

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
    for (size_t i = 0; i < m->ncp && i < TRACE_CP_SHOWN; i++)
        printf(" %llu", (unsigned long long)m->cp[i]);
    printf("%s\n", m->ncp > TRACE_CP_SHOWN ? " ..." : "");
}

/* Prints one collector's row of the transport table and its refusals. */
static void trace_print_collector(const dfxc_json *c)
{
    const dfxc_json *refused = dfxc_json_get(c, "refused");

    printf("%-12s %-12s %10.0f %10.0f %8.0f %13.0f\n", c->key, dfxc_json_str(c, "transport", "?"),
           dfxc_json_num(c, "produced", 0), dfxc_json_num(c, "collected", 0),
           dfxc_json_num(c, "dropped", 0), dfxc_json_num(c, "writer_waits", 0));
    for (size_t i = 0; refused != NULL && refused->type == DFXC_JARR && i < refused->n; i++)
        printf("  refused %s: %s\n", dfxc_json_str(&refused->kids[i], "name", "?"),
               dfxc_json_str(&refused->kids[i], "reason", "?"));
}

/* Prints the transport table of dfx.json. Returns 0, or -1 when it has the wrong shape. */
static int trace_print_dfx(const dfxc_json *dfx)
{
    const dfxc_json *cols = dfxc_json_get(dfx, "collectors");

    if (dfxc_json_num(dfx, "version", -1) != 1 || cols == NULL || cols->type != DFXC_JOBJ)
        return -1;
    printf("transports (dfx.json, clock %s):\n", dfxc_json_str(dfx, "clock", "?"));
    printf("%-12s %-12s %10s %10s %8s %13s\n", "collector", "transport", "produced", "collected",
           "dropped", "writer_waits");
    for (size_t i = 0; i < cols->n; i++)
        trace_print_collector(&cols->kids[i]);
    return 0;
}

int cli_cmd_trace(const cli_opts *o)
{
    char path[4096], buf[CLI_WHY_MAX];
    const char *dir = o->pos[1];
    dfxc_json *dfx = NULL;
    dfxc_model m;
    px_status st;
    int rc;

    if (strcmp(o->pos[0], "summary") != 0)
        return cli_fail("unknown trace command \"%s\"; use `plexus trace summary DIR`", o->pos[0]);
    snprintf(path, sizeof(path), "%s/dfx.json", dir);
    st = dfxc_json_load(path, &dfx);
    if (st == PX_ENOENT)
        return cli_fail("%s has no dfx.json: not a DFX output directory (write one with "
                        "`plexus run EXAMPLE --dfx all --out %s`)",
                        dir, dir);
    if (st != PX_OK)
        return cli_fail("%s", cli_status_text(st, buf, sizeof(buf)));
    st = dfxc_model_load(dir, &m);
    if (st != PX_OK) {
        dfxc_model_free(&m);
        dfxc_json_free(dfx);
        return cli_fail("%s", cli_status_text(st, buf, sizeof(buf)));
    }
    printf("trace summary of %s\n", dir);
    if (m.has_trace || m.has_deps)
        trace_print_model(&m);
    else
        printf("no trace.json or deps.json: swimlane, hosttrace and depgen were off\n");
    rc = trace_print_dfx(dfx);
    dfxc_model_free(&m);
    dfxc_json_free(dfx);
    if (rc != 0)
        return cli_fail("%s: not a version 1 dfx.json with a \"collectors\" object", path);
    printf("PASS\n");
    return 0;
}
