/*
 * host_files.c - a host's level-3 outputs as the level-4 merge's input: read back whole as one
 * blob (trace.json then dfx.json) for the gather across hosts (comm/dfx_hosts.c carries the
 * bytes), with its run's start on its own clock; and a gathered blob written back into
 * DIR/hosts/host<h>/ on host 0, where the merge reads it.
 */
#include "dfx/merge/merge.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <plexus/dfx.h>

#include "dfx/collectors/json.h"
#include "dfx/collectors/out.h"
#include "util/clock.h"
#include "util/file.h"

/* Reads dir/name whole into *text (NULL, 0 when absent). Returns PX_OK, or PX_EIO. */
static px_status dfx_merge_read(const char *dir, const char *name, char **text, size_t *len)
{
    char path[PX_DFX_OUT_MAX + 32];
    px_status st;

    snprintf(path, sizeof(path), "%s/%s", dir, name);
    st = util_file_read(path, "dfx", text, len);
    return st == PX_ENOENT ? PX_OK : st;
}

/* The run's start in ns of this host's clock, from its dfx.json ("clock", "t0_ticks"). Returns
 * PX_OK, or PX_EINVAL when dfx.json is not JSON (message set). */
static px_status dfx_merge_t0_ns(const char *dir, const dfx_merge_files *f, double *t0_ns)
{
    char what[PX_DFX_OUT_MAX + 32];
    dfxc_json *root = NULL;
    px_status st;
    double ticks;

    snprintf(what, sizeof(what), "dfx: %s/dfx.json", dir);
    if ((st = dfxc_json_parse(f->dfx, f->dfx_len, what, &root)) != PX_OK)
        return st;
    ticks = dfxc_json_num(root, "t0_ticks", 0);
    *t0_ns = strcmp(dfxc_json_str(root, "clock", ""), "tsc") == 0 ? ticks / px_ticks_per_ns()
                                                                   : ticks;
    dfxc_json_free(root);
    return PX_OK;
}

px_status dfx_merge_files_read(const char *dir, dfx_merge_files *f)
{
    px_status st = dfx_merge_read(dir, "dfx.json", &f->dfx, &f->dfx_len);

    if (st == PX_OK && f->dfx == NULL)
        st = px_set_error(PX_ENOENT, "dfx: %s/dfx.json was not written", dir);
    if (st == PX_OK)
        st = dfx_merge_t0_ns(dir, f, &f->t0_ns);
    if (st == PX_OK)
        st = dfx_merge_read(dir, "trace.json", &f->trace, &f->trace_len);
    if (st != PX_OK)
        dfx_merge_files_free(f);
    return st;
}

void dfx_merge_files_free(dfx_merge_files *f)
{
    free(f->dfx);
    free(f->trace);
    *f = (dfx_merge_files){0};
}

void dfx_merge_files_slice(const dfx_merge_files *f, uint64_t off, char *out, size_t n)
{
    memset(out, 0, n);
    for (size_t i = 0; i < n; i++) {
        uint64_t k = off + i;

        if (k < f->trace_len)
            out[i] = f->trace[k];
        else if (k - f->trace_len < f->dfx_len)
            out[i] = f->dfx[k - f->trace_len];
        else
            break;
    }
}

/* Makes dir (its parent exists) and checks it is a real directory, not a link. */
static px_status dfx_merge_mkdir(const char *dir)
{
    struct stat sb;

    if (mkdir(dir, 0777) != 0 && errno != EEXIST)
        return px_set_error(PX_EIO, "dfx: cannot create %s: %s", dir, strerror(errno));
    if (lstat(dir, &sb) != 0 || !S_ISDIR(sb.st_mode))
        return px_set_error(PX_EIO, "dfx: %s is not a directory plexus made (a link?); "
                            "plexus never writes through a link: remove it", dir);
    return PX_OK;
}

px_status dfx_merge_files_write(const char *job, int h, uint64_t trace_len, uint64_t dfx_len,
                                const char *blob)
{
    char dir[PX_DFX_OUT_MAX + 48];
    dfxc_buf b;
    px_status st;

    snprintf(dir, sizeof(dir), "%s/hosts", job);
    if ((st = dfx_merge_mkdir(dir)) != PX_OK)
        return st;
    snprintf(dir, sizeof(dir), "%s/hosts/host%d", job, h);
    if ((st = dfx_merge_mkdir(dir)) != PX_OK)
        return st;
    dfxc_buf_init(&b);
    dfxc_buf_put(&b, blob + trace_len, dfx_len);
    st = dfxc_buf_write_file(&b, dir, "dfx.json", "a host's gathered dfx.json");
    dfxc_buf_free(&b);
    if (st != PX_OK || trace_len == 0)
        return st;
    dfxc_buf_init(&b);
    dfxc_buf_put(&b, blob, trace_len);
    st = dfxc_buf_write_file(&b, dir, "trace.json", "a host's gathered trace.json");
    dfxc_buf_free(&b);
    return st;
}
