/*
 * plexus.c - the `plexus` command line: dispatch, help and version.
 *
 *   plexus run EXAMPLE [options]   run one example, check it, print PASS or FAIL
 *   plexus demo [options]          run every example at its default size
 *   plexus doctor [options]        capabilities, the paths they allow, the knob table
 *   plexus trace summary DIR       what a DFX output directory says about its run
 *   plexus help [COMMAND]          this help, or one command's
 *
 * Options are applied on top of px_config_default(), so PLEXUS_* variables keep working and
 * an option wins over its variable. Exit status: 0 success, 1 failure or usage error; every
 * failure ends with one `FAIL: <reason>` line on stdout.
 */
#include "cli.h"

#include <string.h>

#include "caps/caps_internal.h"
#include "util/tl_list.h"

static int cli_cmd_help(const cli_opts *o);

static const cli_command cli_commands[] = {
    {"run", CLI_OPT_CORES | CLI_OPT_SIZE | CLI_OPT_ITERS | CLI_OPT_TILE | CLI_OPT_PROFILE |
     CLI_OPT_KILL_CHIP | CLI_OPT_AT_ITER | CLI_OPT_SHRINK | CLI_OPT_CHIPS | CLI_OPT_OP |
     CLI_OPT_DTYPE | CLI_OPT_COMM_TRANSPORT | CLI_OPT_INDEFINITE | CLI_OPTS_DFX, 1, 1,
     "run EXAMPLE [--cores N] [--size N] [--iters N] [--tile N] [--chips N] "
     "[--kill-chip C|H:C --at-iter N] [--shrink WHERE] "
     "[--op OP] [--dtype T] [--indefinite ROW] [--comm-transport T] [--device-profile P] [--dfx LIST --out DIR] "
     "[--dfx-transport LIST] [--dfx-args-level N]",
     "Runs one example program on a new worker and checks its output against a host\n"
     "computation and its task and edge counts against the ones worked out by hand.\n"
     "Prints `tasks <n>`, `edges <n>`, `time_ms <t>`, the check, then PASS or FAIL: <reason>.\n"
     "With --dfx the DFX collectors write their files into --out DIR (default\n"
     "PLEXUS_DFX_OUT); the run prints `dfx <DIR>` and one line per file.\n"
     "--comm-transport T (level-3 examples; T: " PX_COMM_TL_CHOICES ") sets the transport\n"
     "of every pair of chips of their domains (PLEXUS_COMM_TRANSPORT): auto takes the first\n"
     "the pair can use, a name forces it; mpi sends every pair through the workers' MPI\n"
     "proxies, also without mpirun (MPI then starts as a singleton). A forced transport\n"
     "that a pair cannot use fails the run with the reason and the transports that would\n"
     "work.",
     cli_cmd_run},
    {"demo", CLI_OPT_CORES | CLI_OPT_PROFILE | CLI_OPT_CHIPS | CLI_OPT_OUT |
     CLI_OPT_DFX_TRANSPORT | CLI_OPT_COMM_TRANSPORT, 0, 0,
     "demo [--cores N] [--chips N] [--comm-transport T] [--device-profile P] [--out DIR] "
     "[--dfx-transport LIST]",
     "Runs the examples vector, matmul, multi_chip (level 3: --chips processes), allreduce\n"
     "and tp_mlp (level 3 on 4 chips, or --chips) at their default sizes, prints each\n"
     "result (for allreduce and tp_mlp a line per domain: members, transport and how many\n"
     "pairs use each, bytes moved, time, then one line per distinct reason of the pairs not\n"
     "on direct), then one final PASS or FAIL: <reason> line. DFX is on with every\n"
     "collector (no --dfx needed); each example's files go to --out DIR/<example> (default\n"
     "./plexus-demo-out) and the demo prints where.",
     cli_cmd_demo},
    {"doctor", CLI_OPT_JSON | CLI_OPT_CONFIG | CLI_OPT_PROFILE | CLI_OPT_DFX |
     CLI_OPT_DFX_TRANSPORT | CLI_OPT_COMM | CLI_OPT_CHIPS | CLI_OPT_COMM_TRANSPORT, 0, 0,
     "doctor [--json] [--config | --comm [--chips N] [--comm-transport T]] "
     "[--device-profile P] [--dfx LIST] [--dfx-transport LIST]",
     "Prints the capability table (every fact with its value, source and note) and the\n"
     "paths it allows: host mapping of device memory with ordinary pages, with huge pages,\n"
     "and peer mapping between chips, each \"available\" or \"refused: <why>\", then the\n"
     "DFX transport each collector would use (every collector, or --dfx LIST) under\n"
     "--dfx-transport, with every refusal and its reason.\n"
     "--json prints {\"version\": 1, \"facts\": {...}, \"paths\": {...}} instead;\n"
     "--config prints the PLEXUS_* knob table (value, default, meaning) instead.\n"
     "--comm prints instead, for a domain of chips 0..N-1 (--chips N, default PLEXUS_CHIPS,\n"
     "else 4), each pair of ranks' transport and why, every transport's verdict, and for a\n"
     "pair with none the error px_domain_alloc would return, from the selection code of\n"
     "px_domain_alloc under --comm-transport (PLEXUS_COMM_TRANSPORT) and the device\n"
     "profile; it explains and exits 0 even when a domain would fail. With --json: one\n"
     "document {\"version\": 1, \"comm\": {...}} (docs/formats.md).",
     cli_cmd_doctor},
    {"trace", 0, 2, 2, "trace summary DIR",
     "Reads a DFX output directory (plexus run ... --dfx ... --out DIR) and prints the\n"
     "task and edge counts, per-kernel counts and times, the critical path, and the\n"
     "transport table of dfx.json (transport, counts and refusals per collector).",
     cli_cmd_trace},
    {"help", 0, 0, 1, "help [COMMAND]", "Describes every command, or one command.", cli_cmd_help},
    {NULL, 0, 0, 0, NULL, NULL, NULL},
};

/* Writes the names of every command ("run, demo, ...") into buf (n bytes); returns buf. */
static const char *cli_command_names(char *buf, size_t n)
{
    size_t used = 0;

    buf[0] = '\0';
    for (int i = 0; cli_commands[i].name != NULL && used < n; i++)
        used += (size_t)snprintf(buf + used, n - used, "%s%s", i ? ", " : "",
                                 cli_commands[i].name);
    return buf;
}

/* Returns the command called name, or NULL. */
static const cli_command *cli_command_find(const char *name)
{
    for (int i = 0; cli_commands[i].name != NULL; i++)
        if (strcmp(cli_commands[i].name, name) == 0)
            return &cli_commands[i];
    return NULL;
}

static void cli_print_examples(FILE *f)
{
    fprintf(f, "\nexamples (plexus run EXAMPLE):\n");
    for (int i = 0; px_examples[i] != NULL; i++) {
        const px_example *ex = px_examples[i];

        fprintf(f, "  %-10s %s\n", ex->name, ex->doc);
        fprintf(f, "  %-10s --size: %s; default %lld", "", ex->size_doc,
                (long long)ex->default_size);
        if (ex->default_tile != 0)
            fprintf(f, "; --tile: default %lld", (long long)ex->default_tile);
        if (ex->dtypes != NULL)
            fprintf(f, "; --dtype: %s", ex->dtypes);
        if (ex->chips_opt)
            fprintf(f, "; --chips K: level 3 on K chips");
        fprintf(f, "\n");
    }
}

static void cli_print_profiles(FILE *f)
{
    const char *const *names = px_device_profiles();

    fprintf(f, "\ndevice profiles (--device-profile P, or PLEXUS_DEVICE_PROFILE):\n");
    for (int i = 0; names != NULL && names[i] != NULL; i++) {
        const char *d = caps_profile_describe(names[i]);

        fprintf(f, "  %-10s %s\n", names[i], d ? d : "");
    }
}

/* Prints one command's help, with the lists its options refer to. */
static void cli_print_command_help(const cli_command *cmd, FILE *f)
{
    cli_command_help(cmd, f);
    if (cmd->options & CLI_OPT_SIZE)
        cli_print_examples(f);
    if (cmd->options & CLI_OPT_PROFILE)
        cli_print_profiles(f);
}

static void cli_print_help(FILE *f)
{
    fprintf(f,
            "plexus %s - task-graph runtime: examples, checks and capability report\n\n"
            "usage: plexus COMMAND [options]\n       plexus --help | --version\n\n"
            "commands:\n",
            PX_VERSION_STRING);
    for (int i = 0; cli_commands[i].name != NULL; i++)
        fprintf(f, "  plexus %s\n", cli_commands[i].synopsis);
    fprintf(f, "\noptions:\n");
    for (int i = 0; cli_options[i].name != NULL; i++) {
        char left[40];

        snprintf(left, sizeof(left), "%s%s%s", cli_options[i].name, cli_options[i].arg ? " " : "",
                 cli_options[i].arg ? cli_options[i].arg : "");
        fprintf(f, "  %-22s %s\n", left, cli_options[i].doc);
    }
    cli_print_examples(f);
    cli_print_profiles(f);
    fprintf(f, "\nenvironment: every PLEXUS_* knob is listed by `plexus doctor --config`;\n"
               "options override their knob. Results and the last line, PASS or FAIL: <reason>,\n"
               "go to stdout; logs go to stderr (PLEXUS_LOG=error|warn|info|debug).\n"
               "exit status: 0 success, 1 failure or usage error.\n"
               "`plexus COMMAND --help` describes one command.\n");
}

static int cli_cmd_help(const cli_opts *o)
{
    const cli_command *cmd;
    char names[128];

    if (o->npos == 0) {
        cli_print_help(stdout);
        return 0;
    }
    cmd = cli_command_find(o->pos[0]);
    if (cmd == NULL)
        return cli_fail("unknown command \"%s\" (commands: %s)", o->pos[0],
                        cli_command_names(names, sizeof(names)));
    cli_print_command_help(cmd, stdout);
    return 0;
}

/* --help and --version take nothing after them: an extra word is a usage error. */
static int cli_no_extra(int argc, char **argv)
{
    if (argc <= 2)
        return 0;
    return cli_fail("unexpected argument \"%s\" after %s (it takes none; use `plexus help "
                    "COMMAND` or `plexus COMMAND --help` for one command's help)",
                    argv[2], argv[1]);
}

int main(int argc, char **argv)
{
    const cli_command *cmd;
    char why[CLI_WHY_MAX], names[128];
    cli_opts o;

    if (argc < 2) {
        cli_print_help(stderr);
        return cli_fail("no command given; try `plexus --help`");
    }
    if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0) {
        if (argc > 2)
            return cli_no_extra(argc, argv);
        cli_print_help(stdout);
        return 0;
    }
    if (strcmp(argv[1], "--version") == 0 || strcmp(argv[1], "version") == 0) {
        if (argc > 2)
            return cli_no_extra(argc, argv);
        printf("plexus %s\n", PX_VERSION_STRING);
        return 0;
    }
    cmd = cli_command_find(argv[1]);
    if (cmd == NULL)
        return cli_fail("unknown command \"%s\" (commands: %s; see `plexus --help`)", argv[1],
                        cli_command_names(names, sizeof(names)));
    if (cli_parse(cmd, argc - 2, argv + 2, &o, why, sizeof(why)) != 0)
        return cli_fail("%s", why);
    if (o.given & CLI_OPT_HELP) {
        cli_print_command_help(cmd, stdout);
        return 0;
    }
    return cmd->fn(&o);
}
