/*
 * fuzz_trace.c - fuzzes the reader behind `plexus trace summary` (src/dfx/collectors/json.c
 * and model.c).
 *
 * The input's first byte chooses the file, the rest is its text: dfxc_json_parse() reads it
 * as dfx.json is read, then it is written to a scratch directory as trace.json (first byte
 * even) or deps.json (odd) and dfxc_model_load() builds the summary's model from it, as
 * `plexus trace summary DIR` does. A thin wrapper around those two calls, so it follows the
 * reader if the reader is replaced.
 */
#include "fuzz.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "dfx/collectors/json.h"
#include "dfx/collectors/model.h"

/* Writes n bytes to dir/name (replacing it) and removes dir/other. Returns 0 or -1. */
static int fuzz_put(const char *dir, const char *name, const char *other, const uint8_t *p,
                    size_t n)
{
    char path[512];
    FILE *f;
    int bad;

    snprintf(path, sizeof(path), "%s/%s", dir, other);
    (void)unlink(path);
    snprintf(path, sizeof(path), "%s/%s", dir, name);
    f = fopen(path, "wb");
    if (f == NULL)
        return -1;
    bad = n > 0 && fwrite(p, 1, n, f) != n;
    return fclose(f) != 0 || bad ? -1 : 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static char dir[] = "/tmp/px_fuzz_trace_XXXXXX";
    static int made;
    dfxc_json *root = NULL;
    dfxc_model m;
    int deps;

    if (size < 1)
        return 0;
    if (!made && mkdtemp(dir) == NULL)
        return 0;
    made = 1;
    deps = data[0] & 1;
    if (dfxc_json_parse((const char *)data + 1, size - 1, "fuzz", &root) == PX_OK) {
        (void)dfxc_json_num(root, "version", -1);
        (void)dfxc_json_str(root, "clock", "?");
        (void)dfxc_json_get(root, "collectors");
    }
    dfxc_json_free(root);
    if (fuzz_put(dir, deps ? "deps.json" : "trace.json", deps ? "trace.json" : "deps.json",
                 data + 1, size - 1) != 0)
        return 0;
    memset(&m, 0, sizeof(m));
    (void)dfxc_model_load(dir, &m);
    dfxc_model_free(&m);
    return 0;
}
