/*
 * cli_opts.c - option parsing for the `plexus` command line.
 *
 * One table, cli_options[], names every option, its argument and its documentation; the
 * parser and the help printer both read it. Options accept `--name VALUE` and `--name=VALUE`.
 * Every mistake (unknown option, option of another command, missing value, bad number) is
 * returned as a sentence that names the option, the value and what is expected.
 */
#include "cli.h"

#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "caps/caps_internal.h"
#include "util/tl_list.h"
#include "util/log.h"

#define CLI_MAX_SIZE (1ll << 40)
#define CLI_MAX_ITERS (1 << 20)
#define CLI_MAX_CORES 1024

const cli_option cli_options[] = {
    {"--cores", CLI_OPT_CORES, "N",
     "core threads per chip, 0..1024 (0: online CPUs; default: PLEXUS_CORES)"},
    {"--size", CLI_OPT_SIZE, "N", "problem size of the example (see the list of examples)"},
    {"--chips", CLI_OPT_CHIPS, "N",
     "chips of a level-3 example (multi_chip, allreduce, moe, tp_mlp; cholesky: runs it at "
     "level 3), 1..64, each its own process (default: PLEXUS_CHIPS, 2); doctor --comm: chips "
     "0..N-1 of the domain shown (default: PLEXUS_CHIPS, else 4)"},
    {"--iters", CLI_OPT_ITERS, "N", "repetitions inside the one orchestration (default 1)"},
    {"--tile", CLI_OPT_TILE, "N", "tile edge of tiled examples (matmul: default 64; cholesky: 256)"},
    {"--op", CLI_OPT_OP, "OP", "reduction of allreduce: sum (default), prod, min or max"},
    {"--dtype", CLI_OPT_DTYPE, "T",
     "element type of allreduce: f32 (default), f64, i32 or i64; of cholesky: f32 or f64 "
     "(default)"},
    {"--indefinite", CLI_OPT_INDEFINITE, "ROW",
     "cholesky: make the generated matrix indefinite at row ROW (0..N-1): the run must FAIL "
     "naming the tile and the step"},
    {"--kill-chip", CLI_OPT_KILL_CHIP, "C|H:C",
     "train_loop: chip C (of host H under mpirun; C alone: of host 0) kills itself "
     "(SIGKILL); the survivors shrink the domain and go on"},
    {"--at-iter", CLI_OPT_AT_ITER, "N",
     "train_loop: the iteration at which --kill-chip dies (default: iters / 2)"},
    {"--shrink", CLI_OPT_SHRINK, "WHERE",
     "train_loop: where the survivors shrink: orchestration (default: a later run, "
     "px_domain_shrink) or kernel (inside the loop's one resilient task, px_comm_shrink)"},
    {"--comm-transport", CLI_OPT_COMM_TRANSPORT, "T",
     "comm transport of every pair of chips: " PX_COMM_TL_CHOICES "; auto takes the first the "
     "pair can use (direct, else staged; mpi between chips of different MPI workers), a name "
     "forces it (mpi: through the workers' MPI proxies, also without mpirun) (default: "
     "PLEXUS_COMM_TRANSPORT, auto)"},
    {"--device-profile", CLI_OPT_PROFILE, "P",
     "sim device profile (default: PLEXUS_DEVICE_PROFILE or \"default\")"},
    {"--dfx", CLI_OPT_DFX, "LIST",
     "DFX collectors: all, 0, or swimlane,hosttrace,depgen,argsdump,pmu,scopestats "
     "(default: PLEXUS_DFX)"},
    {"--out", CLI_OPT_OUT, "DIR", "directory for DFX output files (default: PLEXUS_DFX_OUT)"},
    {"--dfx-transport", CLI_OPT_DFX_TRANSPORT, "LIST",
     "DFX transports allowed, tried in order mapped, mapped_huge, shadow (default: all)"},
    {"--dfx-args-level", CLI_OPT_DFX_ARGS_LEVEL, "N",
     "argsdump: 1 metadata, 2 plus marked args' data, 3 plus all args' data"},
    {"--json", CLI_OPT_JSON, NULL, "print one JSON document instead of text"},
    {"--config", CLI_OPT_CONFIG, NULL, "print the configuration knob table instead"},
    {"--comm", CLI_OPT_COMM, NULL,
     "print each pair of chips' comm transport and every transport's verdict instead"},
    {"--help", CLI_OPT_HELP, NULL, "describe the command and its options"},
    {NULL, 0, NULL, NULL},
};

/* Returns the option named by the first len bytes of s ("-h" is --help), or NULL. */
static const cli_option *cli_option_find(const char *s, size_t len)
{
    if (len == 2 && strncmp(s, "-h", 2) == 0)
        s = "--help", len = 6;
    for (int i = 0; cli_options[i].name != NULL; i++)
        if (strlen(cli_options[i].name) == len && strncmp(cli_options[i].name, s, len) == 0)
            return &cli_options[i];
    return NULL;
}

/*
 * Parses a decimal integer in [lo, hi]: an optional '-' and digits only, the rule of the
 * PLEXUS_* knobs (no spaces, no '+', no 0x). Returns 0, or -1 with the reason in why.
 */
static int cli_parse_int(const cli_option *opt, const char *text, long long lo, long long hi,
                         long long *out, char *why, size_t n)
{
    char d = text[text[0] == '-'];
    char *end = NULL;
    long long v = 0;

    errno = 0;
    if (d >= '0' && d <= '9')
        v = strtoll(text, &end, 10);
    if (end == NULL || errno != 0 || *end != '\0' || v < lo || v > hi) {
        snprintf(why, n, "option %s: \"%s\" is not valid; expected an integer %lld..%lld",
                 opt->name, text, lo, hi);
        return -1;
    }
    *out = v;
    return 0;
}

/* --kill-chip C or H:C: chip C (0..63) of host H (0..PX_CHIP_HOSTS_MAX-1; 0 when absent). */
static int cli_parse_kill_chip(const cli_option *opt, const char *val, cli_opts *o, char *why,
                               size_t n)
{
    const char *colon = strchr(val, ':'), *chip = val;
    char host[16];
    long long h = 0, c = 0;
    int bad = 0;

    if (colon != NULL) {
        size_t len = (size_t)(colon - val);

        bad = len == 0 || len >= sizeof(host);
        if (!bad) {
            memcpy(host, val, len);
            host[len] = '\0';
            bad = cli_parse_int(opt, host, 0, PX_CHIP_HOSTS_MAX - 1, &h, why, n) != 0;
        }
        chip = colon + 1;
    }
    if (bad || cli_parse_int(opt, chip, 0, 63, &c, why, n) != 0) {
        snprintf(why, n, "option %s: \"%s\" is not valid; expected C or H:C (chip C 0..63 of "
                 "host H 0..%d)", opt->name, val, PX_CHIP_HOSTS_MAX - 1);
        return -1;
    }
    o->ex.kill_host = (int)h;
    o->ex.kill_chip = (int)c + 1;
    return 0;
}

/* Stores the value of one option into o. Returns 0, or -1 with the reason in why. */
static int cli_apply(const cli_option *opt, const char *val, cli_opts *o, char *why, size_t n)
{
    long long v = 0;
    int rc = 0;

    switch (opt->bit) {
    case CLI_OPT_CORES:
        rc = cli_parse_int(opt, val, 0, CLI_MAX_CORES, &v, why, n);
        o->cores = (int)v;
        break;
    case CLI_OPT_SIZE:
        rc = cli_parse_int(opt, val, 1, CLI_MAX_SIZE, &v, why, n);
        o->ex.size = v;
        break;
    case CLI_OPT_ITERS:
        rc = cli_parse_int(opt, val, 1, CLI_MAX_ITERS, &v, why, n);
        o->ex.iters = (int)v;
        break;
    case CLI_OPT_KILL_CHIP: /* C, or H:C (chip C of host H) */
        rc = cli_parse_kill_chip(opt, val, o, why, n);
        break;
    case CLI_OPT_AT_ITER:
        rc = cli_parse_int(opt, val, 1, CLI_MAX_ITERS, &v, why, n);
        o->ex.at_iter = (int)v;
        break;
    case CLI_OPT_SHRINK:
        o->ex.shrink = val;
        break;
    case CLI_OPT_INDEFINITE:
        rc = cli_parse_int(opt, val, 0, CLI_MAX_SIZE - 1, &v, why, n);
        o->ex.indefinite = v + 1;
        break;
    case CLI_OPT_TILE:
        rc = cli_parse_int(opt, val, 1, CLI_MAX_SIZE, &v, why, n);
        o->ex.tile = v;
        break;
    case CLI_OPT_PROFILE:
        o->profile = val;
        break;
    case CLI_OPT_OP:
        o->ex.op = val;
        break;
    case CLI_OPT_DTYPE:
        o->ex.dtype = val;
        break;
    case CLI_OPT_DFX:
        o->dfx = val;
        break;
    case CLI_OPT_OUT:
        o->out = val;
        break;
    case CLI_OPT_DFX_TRANSPORT:
        o->dfx_transport = val;
        break;
    case CLI_OPT_DFX_ARGS_LEVEL:
        o->dfx_args_level = val;
        break;
    case CLI_OPT_COMM_TRANSPORT:
        o->comm_transport = val;
        break;
    case CLI_OPT_CHIPS:
        rc = cli_parse_int(opt, val, 1, 64, &v, why, n);
        o->chips = (int)v;
        break;
    default:
        break;
    }
    if (rc == 0)
        o->given |= opt->bit;
    return rc;
}

/* Handles argv[*i], an option; may consume the next word as its value. */
static int cli_parse_option(const cli_command *cmd, int argc, char **argv, int *i, cli_opts *o,
                            char *why, size_t n)
{
    const char *s = argv[*i];
    const char *eq = strchr(s, '=');
    int len = eq ? (int)(eq - s) : (int)strlen(s);
    const cli_option *opt = cli_option_find(s, (size_t)len);
    const char *val = eq ? eq + 1 : NULL;

    if (opt == NULL) {
        snprintf(why, n, "unknown option \"%.*s\" for `plexus %s` (see `plexus %s --help`)", len, s,
                 cmd->name, cmd->name);
        return -1;
    }
    if (!(opt->bit & (cmd->options | CLI_OPT_HELP))) {
        snprintf(why, n, "option %s does not apply to `plexus %s` (see `plexus %s --help`)",
                 opt->name, cmd->name, cmd->name);
        return -1;
    }
    if (opt->arg == NULL && val != NULL) {
        snprintf(why, n, "option %s takes no value (got \"%s\")", opt->name, val);
        return -1;
    }
    if (opt->arg != NULL && val == NULL) {
        if (*i + 1 >= argc) {
            snprintf(why, n, "option %s needs a value %s", opt->name, opt->arg);
            return -1;
        }
        val = argv[++*i];
    }
    return cli_apply(opt, val, o, why, n);
}

/* Checks the number of positional arguments against the command's range. */
static int cli_check_positional(const cli_command *cmd, const cli_opts *o, char *why, size_t n)
{
    if (o->npos >= cmd->min_pos)
        return 0;
    snprintf(why, n, "`plexus %s` needs more arguments: plexus %s", cmd->name, cmd->synopsis);
    return -1;
}

int cli_parse(const cli_command *cmd, int argc, char **argv, cli_opts *o, char *why, size_t n)
{
    int only_positional = 0;

    memset(o, 0, sizeof(*o));
    for (int i = 0; i < argc; i++) {
        const char *s = argv[i];

        if (!only_positional && strcmp(s, "--") == 0) {
            only_positional = 1;
        } else if (!only_positional && s[0] == '-' && s[1] != '\0') {
            if (cli_parse_option(cmd, argc, argv, &i, o, why, n) != 0)
                return -1;
        } else if (o->npos >= cmd->max_pos || o->npos >= CLI_MAX_POSITIONAL) {
            snprintf(why, n, "unexpected argument \"%s\": plexus %s", s, cmd->synopsis);
            return -1;
        } else {
            o->pos[o->npos++] = s;
        }
    }
    if (o->given & CLI_OPT_HELP)
        return 0;
    return cli_check_positional(cmd, o, why, n);
}

/* Applies one option through its knob; returns 0, or -1 naming the option in why. */
static int cli_config_knob(px_config *c, const char *opt, const char *knob, const char *val,
                           char *why, size_t n)
{
    if (val == NULL || px_config_set(c, knob, val) == PX_OK)
        return 0;
    snprintf(why, n, "option %s: %s", opt, px_last_error());
    return -1;
}

/* Applies --dfx, --out, --dfx-transport and --dfx-args-level. Returns 0 or -1 (why). */
static int cli_config_dfx(const cli_opts *o, px_config *c, char *why, size_t n)
{
    if (cli_config_knob(c, "--dfx", "PLEXUS_DFX", o->dfx, why, n) != 0 ||
        cli_config_knob(c, "--out", "PLEXUS_DFX_OUT", o->out, why, n) != 0 ||
        cli_config_knob(c, "--dfx-transport", "PLEXUS_DFX_TRANSPORT", o->dfx_transport, why,
                        n) != 0 ||
        cli_config_knob(c, "--dfx-args-level", "PLEXUS_DFX_ARGS_LEVEL", o->dfx_args_level,
                        why, n) != 0)
        return -1;
    if (o->out != NULL && (c->dfx & PX_DFX_ALL) == 0 && o->dfx == NULL) {
        snprintf(why, n, "option --out %s: no DFX collector is on; add --dfx all (or a list "
                 "such as --dfx swimlane,depgen)", o->out);
        return -1;
    }
    return 0;
}

int cli_config(const cli_opts *o, px_config *c, char *why, size_t n)
{
    px_status st = px_config_default(c);
    char buf[CLI_WHY_MAX];

    if (st != PX_OK) {
        snprintf(why, n, "environment: %s", cli_status_text(st, buf, sizeof(buf)));
        return -1;
    }
    if (o->given & CLI_OPT_CORES)
        c->cores = o->cores;
    if (o->given & CLI_OPT_CHIPS)
        c->chips = o->chips;
    if (o->profile != NULL)
        st = px_config_set(c, "PLEXUS_DEVICE_PROFILE", o->profile);
    if (st == PX_OK && (cli_config_dfx(o, c, why, n) != 0 ||
                        cli_config_knob(c, "--comm-transport", "PLEXUS_COMM_TRANSPORT",
                                        o->comm_transport, why, n) != 0))
        return -1;
    if (st == PX_OK)
        st = caps_profile_check(c->device_profile);
    if (st == PX_OK)
        st = px_config_validate(c);
    if (st != PX_OK) {
        snprintf(why, n, "%s", cli_status_text(st, buf, sizeof(buf)));
        return -1;
    }
    px_log_set_level(c->log_level);
    return 0;
}

int cli_fail(const char *fmt, ...)
{
    va_list ap;

    fputs("FAIL: ", stdout);
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    fputc('\n', stdout);
    fflush(stdout);
    return 1;
}

const char *cli_status_text(px_status st, char *buf, size_t n)
{
    const char *msg = px_last_error();

    snprintf(buf, n, "%s: %s", px_status_name(st), msg[0] != '\0' ? msg : px_status_str(st));
    return buf;
}

void cli_command_help(const cli_command *cmd, FILE *f)
{
    fprintf(f, "usage: plexus %s\n\n%s\n\noptions:\n", cmd->synopsis, cmd->doc);
    for (int i = 0; cli_options[i].name != NULL; i++) {
        const cli_option *opt = &cli_options[i];
        char left[40];

        if (!(opt->bit & (cmd->options | CLI_OPT_HELP)))
            continue;
        snprintf(left, sizeof(left), "%s%s%s", opt->name, opt->arg ? " " : "",
                 opt->arg ? opt->arg : "");
        fprintf(f, "  %-22s %s\n", left, opt->doc);
    }
}
