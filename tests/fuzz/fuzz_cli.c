/*
 * fuzz_cli.c - fuzzes the command-line option parser (tools/cli_opts.c).
 *
 * The input is a command description and an argument list: its first four bytes are the
 * option bits the command accepts (CLI_OPT_*), the fifth gives the positional range (min =
 * bits 0-1, max = min + bits 2-3), the rest are the arguments, separated by NUL or newline
 * (at most 16). cli_parse() runs over them; when it accepts them and --help is absent,
 * cli_config() applies them on top of the defaults, as `plexus run` would. A refusal must
 * say why.
 */
#include "fuzz.h"

#include <stdlib.h>
#include <string.h>

#include "cli.h"

#define FUZZ_MAX_ARGS 16

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    cli_command cmd = {"fuzz", 0, 0, 0, "fuzz [options]", "fuzzed command", NULL};
    char why[CLI_WHY_MAX], *text, *argv[FUZZ_MAX_ARGS + 1];
    int argc = 0;
    cli_opts o;
    px_config c;

    if (size < 5)
        return 0;
    cmd.options = (unsigned)data[0] | (unsigned)data[1] << 8 | (unsigned)data[2] << 16 |
                  (unsigned)data[3] << 24;
    cmd.min_pos = data[4] & 3;
    cmd.max_pos = cmd.min_pos + (data[4] >> 2 & 3);
    text = malloc(size - 5 + 1);
    if (text == NULL)
        return 0;
    memcpy(text, data + 5, size - 5);
    text[size - 5] = '\0';
    for (char *p = text, *end = text + (size - 5); p <= end && argc < FUZZ_MAX_ARGS;) {
        size_t len = strcspn(p, "\n");

        argv[argc++] = p;
        p[len] = '\0';
        p += len + 1;
        if (p > end)
            break;
    }
    argv[argc] = NULL;
    why[0] = '\0';
    if (cli_parse(&cmd, argc, argv, &o, why, sizeof(why)) != 0) {
        FUZZ_CHECK(why[0] != '\0');
    } else if (!(o.given & CLI_OPT_HELP)) {
        why[0] = '\0';
        if (cli_config(&o, &c, why, sizeof(why)) != 0)
            FUZZ_CHECK(why[0] != '\0');
    }
    free(text);
    return 0;
}
