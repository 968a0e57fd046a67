/*
 * fuzz_trace.c - fuzzes the reader behind `plexus trace summary` (tools/trace_load.c, which
 * parses with plexus's one JSON reader, src/dfx/collectors/json.c, and the task model of
 * src/dfx/collectors/model.c).
 *
 * The input's first byte chooses the file, the rest is its text: trace_load_buf() reads it as
 * trace.json (first byte even) or deps.json (odd) into a fresh model, which is then finished
 * and freed, as `plexus trace summary DIR` does with each file. A thin wrapper around the
 * reader's one entry for text, so it follows the reader.
 */
#include "fuzz.h"

#include "dfx/collectors/model.h"
#include "trace_load.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    dfxc_model m;

    if (size < 1)
        return 0;
    dfxc_model_init(&m, "tsc");
    if (trace_load_buf((const char *)data + 1, size - 1,
                       (data[0] & 1) ? TRACE_FILE_DEPS : TRACE_FILE_TRACE, &m) == PX_OK)
        (void)dfxc_model_finish(&m);
    dfxc_model_free(&m);
    return 0;
}
