/*
 * dfx_hosts.h - DFX across the hosts of an MPI job (dfx_hosts.c): each host writes its own
 * level-3 outputs into DIR/hosts/host<h>/, host 0 gathers them over the MPI proxies, aligns
 * the clocks and writes the one merged set into DIR.
 */
#ifndef PX_COMM_DFX_HOSTS_H
#define PX_COMM_DFX_HOSTS_H

#include <plexus/status.h>
#include <plexus/worker.h>

#include "comm/proxy.h"
#include "runtime/runtime.h"

/* comm's init hook under MPI (before the fork): with DFX on, w's outputs go into
 * DIR/hosts/host<h> (h the rank the launcher gives). Returns PX_OK or hier_dfx_subdir's
 * error. */
px_status comm_dfx_hosts_init(px_worker *w);

/*
 * The dfx_merged hook under MPI: this host's level-3 outputs are in dir (DIR/hosts/host<h>;
 * merge_st the merge's status). Every host of the job calls it at the end of the same run;
 * each step is bounded by timeout_s. Host 0 returns PX_OK once the DFX merge wrote the job's
 * one set of outputs into DIR with every host, else the error naming a missing host (written
 * without it) or the merge's; the other hosts return PX_OK once their files are sent, or
 * the gather's error.
 */
px_status comm_dfx_hosts_merged(comm_proxy *p, const char *dir, px_status merge_st,
                                double timeout_s);

/*
 * Where this process's last run under MPI left the DFX outputs (what `plexus run` prints):
 * *host its MPI rank, own (n bytes) this host's directory DIR/hosts/host<h>, merged (m bytes)
 * host 0's DIR, where host 0 wrote the job's merged set ("" when the hosts' headers were not
 * gathered), merged_by (k bytes) host 0's host id. Returns PX_OK, or PX_ENOENT when no run of
 * this process gathered its hosts' outputs.
 */
px_status comm_dfx_hosts_where(int *host, char *own, size_t n, char *merged, size_t m,
                               char *merged_by, size_t k);

#endif
