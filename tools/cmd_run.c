/*
 * cmd_run.c - `plexus run EXAMPLE` and `plexus demo`: execute examples and report them.
 *
 * Each execution prints a header (example, size, iterations, cores, profile), then
 * `tasks <n>`, `edges <n>` (both from px_run_stats_get) and `time_ms <t>`, for the
 * communication examples one `domain <name>: ...` line per domain (members, transport and
 * pairs per transport, bytes moved, time) and a line per distinct reason of its pairs not on
 * direct, then the example's check: `check ok: ...` or `check failed: ...`. The counts are
 * compared with the hand-worked ones by the example's check, so a wrong count is a failure
 * like a wrong number.
 */
#include "cli.h"
#include "comm/dfx_hosts.h"
#include "util/tl_list.h"

#include <string.h>
#include <sys/stat.h>

/* Writes "vector, matmul" into buf. */
static const char *run_example_names(char *buf, size_t n)
{
    size_t used = 0;

    buf[0] = '\0';
    for (int i = 0; px_examples[i] != NULL && used < n; i++)
        used += (size_t)snprintf(buf + used, n - used, "%s%s", i ? ", " : "", px_examples[i]->name);
    return buf;
}

static void run_print_header(const px_example *ex, const px_example_opts *eo,
                             const px_example_result *r, const px_config *c)
{
    printf("example %s: size %lld, iters %d", ex->name, (long long)r->size, r->iters);
    if (r->tile != 0)
        printf(", tile %lld", (long long)r->tile);
    if (ex->level == 3 || eo->chips > 0)
        printf(", chips %d", eo->chips > 0 ? eo->chips : c->chips);
    if (ex->reduces)
        printf(", op %s, dtype %s", eo->op ? eo->op : "sum", eo->dtype ? eo->dtype : "f32");
    if (ex->dtypes != NULL)
        printf(", dtype %s", eo->dtype ? eo->dtype : "f64");
    if (eo->indefinite > 0)
        printf(", indefinite at row %lld", (long long)eo->indefinite - 1);
    printf(", cores %d, profile %s", r->cores, c->device_profile);
    if (ex->level == 3 && c->comm_transport != 0) /* forced: said, as every override is */
        printf(", comm transport %s", px_comm_tl_name(c->comm_transport));
    printf("\n");
}

/*
 * Executes one example and prints its lines. Returns 1 when it ran and its check passed,
 * else 0 with the reason in why.
 */
static int run_one(const px_example *ex, const px_config *c, const px_example_opts *eo, char *why,
                   size_t n)
{
    px_example_result r;
    char buf[CLI_WHY_MAX];
    px_status st = px_example_exec(ex, c, eo, &r);

    if (st != PX_OK) {
        snprintf(why, n, "%s: %.900s", ex->name, cli_status_text(st, buf, sizeof(buf)));
        return 0;
    }
    run_print_header(ex, eo, &r, c);
    printf("tasks %llu\nedges %llu\ntime_ms %.3f\n", (unsigned long long)r.tasks,
           (unsigned long long)r.edges, r.seconds * 1e3);
    if (r.comm[0] != '\0')
        printf("%s\n", r.comm);
    if (r.info[0] != '\0')
        printf("%s\n", r.info);
    printf("check %s: %s\n", r.check_ok ? "ok" : "failed", r.check);
    fflush(stdout);
    if (!r.check_ok)
        snprintf(why, n, "%s: check failed: %s", ex->name, r.check);
    return r.check_ok;
}

/* Refuses a bad --op or --dtype before any chip is started, with the example's sentence. */
static int run_check_values(const px_example *ex, const cli_opts *o, char *why, size_t n)
{
    px_redop op;
    px_dtype dt;

    if (!ex->reduces)
        return 0;
    if (px_example_redop(ex->name, o->ex.op, &op) != PX_OK ||
        px_example_dtype(ex->name, o->ex.dtype, &dt) != PX_OK) {
        snprintf(why, n, "%s", px_last_error());
        return -1;
    }
    return 0;
}

/* Refuses options the example has no use for, so a typo is not silently ignored. */
static int run_check_opts(const px_example *ex, const cli_opts *o, char *why, size_t n)
{
    if ((o->given & CLI_OPT_TILE) && ex->default_tile == 0) {
        snprintf(why, n, "option --tile does not apply to example %s (it is not tiled)", ex->name);
        return -1;
    }
    if ((o->given & CLI_OPT_CHIPS) && ex->level != 3 && !ex->chips_opt) {
        snprintf(why, n, "option --chips does not apply to example %s (level %d: one chip)",
                 ex->name, ex->level);
        return -1;
    }
    if ((o->given & CLI_OPT_COMM_TRANSPORT) && ex->level != 3) {
        snprintf(why, n, "option --comm-transport does not apply to example %s (level %d: one "
                 "chip, no communication domain)", ex->name, ex->level);
        return -1;
    }
    if (((o->given & CLI_OPT_OP) && !ex->reduces) ||
        ((o->given & CLI_OPT_DTYPE) && !ex->reduces && ex->dtypes == NULL)) {
        snprintf(why, n, "option %s does not apply to example %s (only allreduce takes --op "
                 "and --dtype; cholesky takes --dtype)", (o->given & CLI_OPT_OP) ? "--op" :
                 "--dtype", ex->name);
        return -1;
    }
    if ((o->given & CLI_OPT_INDEFINITE) && strcmp(ex->name, "cholesky") != 0) {
        snprintf(why, n, "option --indefinite does not apply to example %s (only cholesky "
                 "takes it)", ex->name);
        return -1;
    }
    return run_check_values(ex, o, why, n);
}

/* Prints `dfx <dir>` and `dfx file <path>` for each DFX output in dir; nothing when dir has
 * no dfx.json (nothing was recorded there). */
static void run_print_dir(const char *dir)
{
    static const char *const files[] = {"dfx.json", "trace.json", "deps.json", "deps.dot",
                                        "args/args_dump.json", "args/args.bin", "pmu.csv",
                                        "scope_stats.jsonl", "report.html"};
    char path[PX_DFX_OUT_MAX + 32];
    struct stat sb;

    snprintf(path, sizeof(path), "%s/dfx.json", dir);
    if (stat(path, &sb) != 0)
        return;
    printf("dfx %s\n", dir);
    for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
        snprintf(path, sizeof(path), "%s/%s", dir, files[i]);
        if (stat(path, &sb) == 0)
            printf("dfx file %s\n", path);
    }
}

/*
 * Prints the DFX outputs the run wrote. Under MPI (comm_dfx_hosts_where) each host wrote its
 * own into DIR/hosts/host<h> and host 0 the job's merged set into its DIR: every host prints
 * its own, then `dfx merged <dir> by host 0 (<id>)`; host 0 also lists the merged files, which
 * it wrote (another host's DIR may differ from host 0's, or be on another machine).
 */
static void run_print_dfx(const px_config *c)
{
    char own[PX_DFX_OUT_MAX], merged[PX_DFX_OUT_MAX], by[128];
    int host;

    if ((c->dfx & PX_DFX_ALL) == 0)
        return;
    if (comm_dfx_hosts_where(&host, own, sizeof(own), merged, sizeof(merged), by,
                             sizeof(by)) != PX_OK) {
        run_print_dir(c->out_dir);
    } else {
        run_print_dir(own);
        if (merged[0] != '\0')
            printf("dfx merged %s by host 0 (%s)\n", merged, by);
        if (host == 0 && merged[0] != '\0')
            run_print_dir(merged);
    }
    fflush(stdout);
}

int cli_cmd_run(const cli_opts *o)
{
    const px_example *ex = px_example_find(o->pos[0]);
    char why[CLI_WHY_MAX], names[256];
    px_example_opts eo;
    px_config c;

    if (ex == NULL)
        return cli_fail("unknown example \"%s\" (examples: %s; see `plexus run --help`)", o->pos[0],
                        run_example_names(names, sizeof(names)));
    if (run_check_opts(ex, o, why, sizeof(why)) != 0 || cli_config(o, &c, why, sizeof(why)))
        return cli_fail("%s", why);
    eo = o->ex;
    if (ex->chips_opt && (o->given & CLI_OPT_CHIPS))
        eo.chips = o->chips; /* level 3 on that many chips; level 2 without --chips */
    if (!run_one(ex, &c, &eo, why, sizeof(why)))
        return cli_fail("%s", why);
    run_print_dfx(&c);
    printf("PASS\n");
    return 0;
}

/*
 * The demo's DFX: every collector, into <base>/<example> (at level 3 each chip's files go to
 * chips/chip<i>/ there and the parent merges them); none in a build with DFX compiled out.
 * base is --out (already checked as PLEXUS_DFX_OUT by cli_config) or ./plexus-demo-out.
 * Returns 0, or -1 with the reason in why when the directory name does not fit.
 */
static int demo_dfx(const px_example *ex, const char *base, px_config *c, char *why, size_t n)
{
    int len;

    if (!px_dfx_compiled_in()) {
        c->dfx = 0;
        return 0;
    }
    c->dfx = PX_DFX_ALL;
    len = snprintf(c->out_dir, sizeof(c->out_dir), "%s/%s", base, ex->name);
    if (len < 0 || (size_t)len >= sizeof(c->out_dir)) {
        snprintf(why, n, "option --out: \"%.200s/%s\" is longer than %zu bytes; choose a "
                 "shorter directory", base, ex->name, sizeof(c->out_dir) - 1);
        return -1;
    }
    return 0;
}

/*
 * Makes the demo's configuration: DFX is on (every collector) when compiled in, so --out is
 * accepted without --dfx. Returns 0, or -1 with the reason in why.
 */
static int demo_config(const cli_opts *o, px_config *c, char *why, size_t n)
{
    cli_opts dopts = *o;

    if (px_dfx_compiled_in()) {
        dopts.dfx = "all";
    } else if (o->out != NULL) {
        snprintf(why, n, "option --out %s: this build has DFX compiled out (PX_DFX=OFF), so "
                 "the demo writes no files; rebuild with -DPX_DFX=ON or drop --out", o->out);
        return -1;
    }
    return cli_config(&dopts, c, why, n);
}

/* The demo's examples, in order; chips > 0: run on that many chips unless --chips is given. */
static const struct {
    const char *name;
    int chips;
} demo_rows[] = {
    {"vector", 0}, {"matmul", 0}, {"multi_chip", 0}, {"allreduce", 4}, {"tp_mlp", 4},
    {"cholesky", 0}, /* last: it loads OpenBLAS into the process (level 2, N 1024, tile 256) */
};

#define DEMO_ROWS (sizeof(demo_rows) / sizeof(demo_rows[0]))

int cli_cmd_demo(const cli_opts *o)
{
    char why[CLI_WHY_MAX], first[CLI_WHY_MAX] = "", base[PX_DFX_OUT_MAX];
    px_example_opts eo = {0};
    int failed = 0;
    px_config c;

    if (demo_config(o, &c, why, sizeof(why)) != 0)
        return cli_fail("%s", why);
    snprintf(base, sizeof(base), "%s", o->out != NULL ? c.out_dir : "plexus-demo-out");
    for (size_t i = 0; i < DEMO_ROWS; i++) {
        const px_example *ex = px_example_find(demo_rows[i].name);

        printf("== %s\n", demo_rows[i].name);
        if (ex == NULL) {
            snprintf(why, sizeof(why), "%s: example missing from the table", demo_rows[i].name);
        } else {
            px_config dc = c;

            if (demo_rows[i].chips > 0 && !(o->given & CLI_OPT_CHIPS))
                dc.chips = demo_rows[i].chips;
            if (demo_dfx(ex, base, &dc, why, sizeof(why)) == 0 &&
                run_one(ex, &dc, &eo, why, sizeof(why))) {
                run_print_dfx(&dc);
                continue;
            }
        }
        printf("failed: %s\n", why);
        if (failed++ == 0)
            snprintf(first, sizeof(first), "%s", why);
    }
    if (failed)
        return cli_fail("%d of %zu examples failed; first: %s", failed, DEMO_ROWS, first);
    printf("PASS\n");
    return 0;
}
