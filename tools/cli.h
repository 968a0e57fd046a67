/*
 * cli.h - the pieces of the `plexus` command line shared by its files.
 *
 * plexus.c dispatches commands and prints help; cli_opts.c parses options against one table
 * (cli_options[]) so that parsing and `--help` text cannot drift apart; cmd_run.c runs the
 * examples (run, demo); cmd_doctor.c prints capabilities, paths and knobs. Results and the
 * final `PASS` / `FAIL: <reason>` line go to stdout, diagnostics to stderr.
 */
#ifndef PX_TOOLS_CLI_H
#define PX_TOOLS_CLI_H

#include <stddef.h>
#include <stdio.h>

#include <plexus/plexus.h>

#include "examples.h"

/* Option bits: each command accepts a subset. */
enum {
    CLI_OPT_CORES = 1u << 0,
    CLI_OPT_SIZE = 1u << 1,
    CLI_OPT_ITERS = 1u << 2,
    CLI_OPT_TILE = 1u << 3,
    CLI_OPT_PROFILE = 1u << 4,
    CLI_OPT_JSON = 1u << 5,
    CLI_OPT_CONFIG = 1u << 6,
    CLI_OPT_HELP = 1u << 7,
    CLI_OPT_COMM = 1u << 8,            /* doctor --comm: the comm transport of each pair */
    CLI_OPT_CHIPS = 1u << 16, /* level-3 examples: chips of the worker */
    CLI_OPT_OP = 1u << 17,    /* --op NAME: reduction of a reducing example (allreduce) */
    CLI_OPT_DTYPE = 1u << 18, /* --dtype NAME: its element type */
    CLI_OPT_COMM_TRANSPORT = 1u << 19, /* --comm-transport T: auto or a transport */
    CLI_OPT_KILL_CHIP = 1u << 20,      /* --kill-chip N: train_loop kills chip N */
    CLI_OPT_AT_ITER = 1u << 21,        /* --at-iter N: ... at iteration N */
    CLI_OPT_SHRINK = 1u << 22,         /* --shrink WHERE: ... and the survivors shrink there */
    CLI_OPT_INDEFINITE = 1u << 23,     /* --indefinite ROW: cholesky's matrix made indefinite */
    CLI_OPT_DFX = 1u << 24,            /* --dfx LIST: DFX collectors */
    CLI_OPT_OUT = 1u << 25,            /* --out DIR: DFX output directory */
    CLI_OPT_DFX_TRANSPORT = 1u << 26,  /* --dfx-transport LIST: allowed DFX transports */
    CLI_OPT_DFX_ARGS_LEVEL = 1u << 27, /* --dfx-args-level N: argsdump level */
};

/* The DFX options together (run takes them all). */
#define CLI_OPTS_DFX (CLI_OPT_DFX | CLI_OPT_OUT | CLI_OPT_DFX_TRANSPORT | CLI_OPT_DFX_ARGS_LEVEL)

#define CLI_MAX_POSITIONAL 4
#define CLI_WHY_MAX 1024

/* The parsed command line of one command. */
typedef struct cli_opts {
    unsigned given;      /* CLI_OPT_* bits of the options present */
    int cores;           /* --cores (applied to the configuration; 0: online CPUs) */
    px_example_opts ex;  /* --size, --iters, --tile, --op, --dtype */
    const char *profile; /* --device-profile, NULL when absent */
    int chips;           /* --chips (applied to the configuration) */
    const char *dfx;     /* --dfx, NULL when absent */
    const char *out;     /* --out, NULL when absent */
    const char *dfx_transport; /* --dfx-transport, NULL when absent */
    const char *dfx_args_level; /* --dfx-args-level, NULL when absent */
    const char *comm_transport; /* --comm-transport, NULL when absent */
    int npos;            /* positional arguments */
    const char *pos[CLI_MAX_POSITIONAL];
} cli_opts;

/* One row of the option table. */
typedef struct cli_option {
    const char *name; /* "--cores" */
    unsigned bit;     /* CLI_OPT_* */
    const char *arg;  /* "N", or NULL for a flag */
    const char *doc;  /* one line for help */
} cli_option;

/* A command: name, accepted options, positional arguments allowed, handler and help. */
typedef struct cli_command {
    const char *name;
    unsigned options; /* CLI_OPT_* bits it accepts (help is always accepted) */
    int min_pos, max_pos;
    const char *synopsis; /* "run EXAMPLE [options]" */
    const char *doc;      /* one paragraph */
    int (*fn)(const cli_opts *o);
} cli_command;

extern const cli_option cli_options[];

/*
 * Parses argv[0..argc) for command cmd. Returns 0, or -1 with a reason in why (n bytes) for
 * an unknown or misplaced option, a missing value, a bad number, or a wrong argument count.
 */
int cli_parse(const cli_command *cmd, int argc, char **argv, cli_opts *o, char *why, size_t n);

/*
 * Fills c with px_config_default() (the PLEXUS_* environment) plus o's options, checks the
 * device profile's name and the configuration, and sets the log level. Returns 0, or -1 with
 * the reason in why.
 */
int cli_config(const cli_opts *o, px_config *c, char *why, size_t n);

/* Prints "FAIL: <reason>" to stdout and returns 1 (the exit status). */
int cli_fail(const char *fmt, ...) PX_PRINTF(1, 2);

/* Writes "<status name>: <last error or status text>" into buf and returns buf. */
const char *cli_status_text(px_status st, char *buf, size_t n);

/* Prints the help of one command (options with their documentation) to f. */
void cli_command_help(const cli_command *cmd, FILE *f);

/* Command handlers; each returns the process exit status. */
int cli_cmd_run(const cli_opts *o);
int cli_cmd_demo(const cli_opts *o);
int cli_cmd_doctor(const cli_opts *o);

/* cmd_doctor_dfx.c: the DFX transport each collector would use, as text and as JSON. */
void doctor_dfx_print(const px_caps *caps, const px_config *c);
px_status doctor_dfx_json(const px_caps *caps, const px_config *c, FILE *f);

/* cmd_doctor_comm.c: `doctor --comm`, each pair's comm transport, as text or (--json) JSON;
 * returns the exit status (0: explained, whatever the verdicts). */
int doctor_comm(const cli_opts *o, const px_caps *caps, const px_config *c);
int cli_cmd_trace(const cli_opts *o);

#endif
