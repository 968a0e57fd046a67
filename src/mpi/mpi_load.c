/*
 * mpi_load.c - when MPI is in use, and loading the MPI plugin (mpi_load.h).
 */
#include "mpi/mpi_load.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/fork.h"
#include "util/log.h"

#ifndef PX_MPI_PLUGIN_DIR
#define PX_MPI_PLUGIN_DIR "/usr/local/lib"
#endif

int px_mpi_mode(void)
{
    const char *v = getenv("PLEXUS_MPI");

    if (v == NULL || v[0] == '\0' || strcmp(v, "auto") == 0)
        return PX_MPI_AUTO;
    return strcmp(v, "on") == 0 ? PX_MPI_ON : PX_MPI_OFF;
}

int px_mpi_launcher_rank(void)
{
    static const char *const vars[] = {"OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK"};

    for (size_t i = 0; i < sizeof(vars) / sizeof(vars[0]); i++) {
        const char *v = getenv(vars[i]);

        if (v != NULL && v[0] >= '0' && v[0] <= '9')
            return atoi(v);
    }
    return 0;
}

int px_mpi_wanted(int forced_mpi, char *why, size_t n)
{
    static const char *const launcher[] = {"OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_RANK"};
    int mode = px_mpi_mode();

    if (mode == PX_MPI_OFF) {
        snprintf(why, n, "PLEXUS_MPI=off");
        return 0;
    }
    if (mode == PX_MPI_ON) {
        snprintf(why, n, "PLEXUS_MPI=on");
        return 1;
    }
    for (size_t i = 0; i < sizeof(launcher) / sizeof(launcher[0]); i++) {
        const char *v = getenv(launcher[i]);

        if (v != NULL && v[0] != '\0') {
            snprintf(why, n, "%s=%.32s: started by an MPI launcher", launcher[i], v);
            return 1;
        }
    }
    if (forced_mpi) {
        snprintf(why, n, "PLEXUS_COMM_TRANSPORT=mpi");
        return 1;
    }
    snprintf(why, n, "not started by an MPI launcher (no OMPI_COMM_WORLD_SIZE, PMIX_RANK or "
             "PMI_RANK) and PLEXUS_MPI is auto");
    return 0;
}

static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static _Atomic int g_state;

/* The plugin's loader lock: held across plexus's forks (a leaf; dlopen's own lock is glibc's). */
__attribute__((constructor)) static void mpi_load_guard(void)
{
    util_fork_guard(&g_lock);
}

int px_mpi_state(void)
{
    return atomic_load_explicit(&g_state, memory_order_acquire);
}

void px_mpi_state_set(int state)
{
    atomic_store_explicit(&g_state, state, memory_order_release);
}
static const px_mpi_ops *g_ops;
static char g_path[512];

/* Tries one file: 1 with g_ops set, else 0 with what the loader said appended to tried. */
static int mpi_try(const char *file, char *tried, size_t n)
{
    void *h = dlopen(file, RTLD_NOW | RTLD_GLOBAL); /* MPI's components need its symbols */
    px_mpi_plugin_fn fn;
    const px_mpi_ops *ops;
    size_t len = strlen(tried);

    if (h == NULL) {
        snprintf(tried + len, n - len, "%s%s", len ? "; " : "", dlerror());
        return 0;
    }
    *(void **)&fn = dlsym(h, PX_MPI_PLUGIN_SYMBOL);
    if (fn == NULL || (ops = fn(PX_MPI_OPS_ABI)) == NULL || ops->abi != PX_MPI_OPS_ABI ||
        ops->size != sizeof(px_mpi_ops)) {
        snprintf(tried + len, n - len, "%s%s: %s", len ? "; " : "", file,
                 fn == NULL ? "not a plexus MPI plugin (no " PX_MPI_PLUGIN_SYMBOL ")" :
                 "built for another plugin ABI than this libplexus (rebuild plexus)");
        dlclose(h);
        return 0;
    }
    g_ops = ops;
    snprintf(g_path, sizeof(g_path), "%s", file);
    return 1;
}

px_status px_mpi_load(const px_mpi_ops **ops, char *path, size_t n)
{
    const char *env = getenv("PLEXUS_MPI_PLUGIN");
    char tried[1024] = "", file[640], dir[512] = "";
    Dl_info info;
    px_status st = PX_OK;

    pthread_mutex_lock(&g_lock);
    if (g_ops == NULL) {
        if (env != NULL && env[0] != '\0') {
            (void)mpi_try(env, tried, sizeof(tried));
        } else {
            if (dladdr((void *)px_mpi_load, &info) != 0 && info.dli_fname != NULL) {
                char *slash;

                snprintf(dir, sizeof(dir), "%s", info.dli_fname);
                if ((slash = strrchr(dir, '/')) != NULL)
                    *slash = '\0';
                else
                    snprintf(dir, sizeof(dir), ".");
            }
            if (dir[0] != '\0') {
                snprintf(file, sizeof(file), "%s/%s", dir, PX_MPI_PLUGIN_NAME);
                if (!mpi_try(file, tried, sizeof(tried))) {
                    snprintf(file, sizeof(file), "%s/../lib/%s", dir, PX_MPI_PLUGIN_NAME);
                    (void)mpi_try(file, tried, sizeof(tried));
                }
            }
            if (g_ops == NULL) {
                snprintf(file, sizeof(file), "%s/%s", PX_MPI_PLUGIN_DIR, PX_MPI_PLUGIN_NAME);
                (void)mpi_try(file, tried, sizeof(tried));
            }
        }
        if (g_ops == NULL)
            st = px_set_error(PX_ENOTSUP, "MPI is in use but the MPI plugin %s could not be "
                              "loaded (%s); build plexus where Open MPI is installed (make deps "
                              "installs libopenmpi-dev), set PLEXUS_MPI_PLUGIN to the plugin's "
                              "path, or set PLEXUS_MPI=off to run this worker on its own",
                              PX_MPI_PLUGIN_NAME, tried);
        else
            PX_LOG_DEBUG("mpi: loaded the plugin %s", g_path);
    }
    if (st == PX_OK) {
        *ops = g_ops;
        if (path != NULL)
            snprintf(path, n, "%s", g_path);
    }
    pthread_mutex_unlock(&g_lock);
    return st;
}

void px_mpi_describe(int forced_mpi, px_mpi_info *out)
{
    const px_mpi_ops *ops;

    memset(out, 0, sizeof(*out));
    out->wanted = px_mpi_wanted(forced_mpi, out->why, sizeof(out->why));
    if (px_mpi_load(&ops, out->path, sizeof(out->path)) == PX_OK) {
        out->loaded = 1;
        ops->version(out->library, sizeof(out->library)); /* callable before MPI_Init */
    } else {
        snprintf(out->error, sizeof(out->error), "%s", px_last_error());
    }
}
