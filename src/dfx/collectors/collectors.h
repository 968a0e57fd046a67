/*
 * collectors.h - the DFX collectors (one file each in this folder) and the report writer.
 *
 * px_dfx_collectors[] is the ordered, NULL-terminated table the drain walks: swimlane,
 * hosttrace, depgen, argsdump, pmu, scopestats. The order is the order of dfx.json. Each
 * collector's output format is documented, with its version, in docs/formats.md.
 *
 * px_dfx_report_write() is not a collector: the framework calls it once after every
 * collector's finish() (and after dfx.json is written), with the task model the collectors
 * built in memory (model.h); nothing is read back from the files.
 */
#ifndef PX_DFX_COLLECTORS_H
#define PX_DFX_COLLECTORS_H

#include <plexus/status.h>

#include "dfx/collector.h"

extern const px_dfx_collector_ops px_dfx_swimlane_ops;
extern const px_dfx_collector_ops px_dfx_hosttrace_ops;
extern const px_dfx_collector_ops px_dfx_depgen_ops;
extern const px_dfx_collector_ops px_dfx_argsdump_ops;
extern const px_dfx_collector_ops px_dfx_pmu_ops;
extern const px_dfx_collector_ops px_dfx_scopestats_ops;

/* Every collector, in dfx.json order, terminated by NULL. */
extern const px_dfx_collector_ops *const px_dfx_collectors[];

struct dfxc_model;

/*
 * Finishes model m (dfxc_model_finish) and writes out_dir/report.html from it. A model with
 * neither trace.json nor deps.json behind it has nothing to report: no file is written (an
 * old one is removed). Returns PX_OK, PX_EIO or PX_ENOMEM.
 */
px_status px_dfx_report_write(const char *out_dir, struct dfxc_model *m);

#endif
