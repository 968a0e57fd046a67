/*
 * trace_load.h - `plexus trace summary`'s reader: trace.json, deps.json and dfx.json of a DFX
 * output directory into the task model (src/dfx/collectors/model.h) and the transport table.
 * The JSON is parsed with plexus's one reader (src/dfx/collectors/json.h), the one the DFX
 * merge and the tests use.
 *
 * trace_load_buf() is the one entry that takes a file's text, so a fuzzer can call it with
 * any bytes: it never crashes, and anything but a well-formed version-1 file of its kind is
 * PX_EINVAL with the reason.
 */
#ifndef PX_TOOLS_TRACE_LOAD_H
#define PX_TOOLS_TRACE_LOAD_H

#include <stddef.h>
#include <plexus/status.h>

#include "dfx/collectors/model.h"

typedef enum trace_file {
    TRACE_FILE_TRACE, /* trace.json: timed tasks, track names, flow edges, the clock */
    TRACE_FILE_DEPS,  /* deps.json: every task and edge */
} trace_file;

/*
 * Adds the file's tasks, tracks and edges (kind `which`, text buf[0..len)) to m, which
 * dfxc_model_init made, and sets m->has_trace or m->has_deps. Returns PX_OK, PX_EINVAL when
 * the text is not a version-1 file of that kind (the message says where), or PX_ENOMEM.
 */
px_status trace_load_buf(const char *buf, size_t len, trace_file which, dfxc_model *m);

/*
 * Reads dir's trace.json and deps.json (each optional) into m (initialised here) and
 * finishes it. Returns PX_OK, the error of a file that is not valid, or PX_EIO.
 */
px_status trace_load_dir(const char *dir, dfxc_model *m);

/*
 * Prints the transport table of dir/dfx.json. Returns PX_OK, PX_ENOENT when there is no
 * dfx.json, PX_EINVAL when it is not a version-1 dfx.json with a "collectors" object.
 */
px_status trace_print_dfx(const char *dir);

#endif
