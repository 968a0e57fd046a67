/*
 * fuzz_knob.c - fuzzes the PLEXUS_* knob parser (src/util/config.c).
 *
 * The input is NAME=VALUE (VALUE ends at the first NUL): px_config_set() parses it into a
 * default configuration; px_config_validate() and px_config_print() then run over the result,
 * so a parser that stores a value the rest cannot handle shows too. A knob that refuses the
 * value must leave the configuration unchanged, and must say why.
 */
#include "fuzz.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <plexus/config.h>
#include <plexus/status.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static FILE *sink;
    char *text = malloc(size + 1), *eq;
    px_config c, before;

    if (text == NULL)
        return 0;
    memcpy(text, data, size);
    text[size] = '\0';
    eq = strchr(text, '=');
    if (sink == NULL)
        sink = fopen("/dev/null", "w");
    memset(&c, 0, sizeof(c));
    (void)px_config_default(&c);
    before = c;
    if (eq != NULL) {
        px_status st;

        *eq = '\0';
        st = px_config_set(&c, text, eq + 1);
        if (st != PX_OK) {
            FUZZ_CHECK(px_last_error()[0] != '\0');
            FUZZ_CHECK(memcmp(&c, &before, sizeof(c)) == 0);
        }
        (void)px_config_validate(&c);
        if (sink != NULL)
            px_config_print(&c, sink);
    }
    free(text);
    return 0;
}
