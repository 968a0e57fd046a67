/*
 * trace.h - the one writer of trace.json (Chrome Trace Event format, version 1 in
 * docs/formats.md): swimlane and hosttrace both contribute events to the trace being built for
 * their output directory, and whichever of them releases it last writes the file. With only
 * one of them on, that one writes it alone; at level 3 every chip's collectors join the same
 * trace (pid = chip).
 *
 * Before writing, the complete ("X") events of each (pid, tid) track are made properly nested,
 * as trace viewers require: a slice that starts inside another and ends after it is clamped to
 * its parent's end (the count is recorded in otherData.clamped).
 */
#ifndef PX_DFX_COLLECTORS_TRACE_H
#define PX_DFX_COLLECTORS_TRACE_H

#include <stdint.h>
#include <plexus/status.h>

#include "dfx/collector.h"

typedef struct dfxc_trace dfxc_trace;

/*
 * Joins (or starts) the trace of info->out_dir as collector `who`. Returns PX_OK with *t, or
 * PX_ENOMEM.
 */
px_status dfxc_trace_attach(const px_dfx_run_info *info, const char *who, dfxc_trace **t);

/*
 * Adds one event. ph is 'X' (dur used), 'M', 's' or 'f'; ts and dur are ns since the run's
 * start; members is the rest of the event's JSON members without braces, without ts, dur, ph,
 * pid and tid (e.g. "\"name\":\"core.run\",\"cat\":\"phase\""). Never fails: out of memory
 * marks the trace broken and the writer reports it.
 */
void dfxc_trace_add(dfxc_trace *t, char ph, int pid, int tid, int64_t ts, int64_t dur,
                    const char *members);

/* Adds the process name of info's chip and its producers' thread names, once per chip. */
void dfxc_trace_names(dfxc_trace *t, const px_dfx_run_info *info);

/*
 * Leaves the trace. `finished` says the caller's finish() ran (its events are complete); the
 * last one to leave writes trace.json when any member finished. Returns PX_OK, or the write's
 * error (only for the one that wrote).
 */
px_status dfxc_trace_release(dfxc_trace *t, int finished);

#endif
