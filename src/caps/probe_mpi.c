/*
 * probe_mpi.c - MPI facts: is an MPI library installed (libmpi can be loaded), was this
 * process started by an MPI launcher (its environment variables are set), and has MPI been
 * initialised in this process.
 *
 * plexus never links MPI: the L4 proxy loads it at run time, so the probe only asks the
 * dynamic loader. mpi_initialized is asked of a libmpi that is already loaded (RTLD_NOLOAD);
 * the probe never loads MPI just to ask it, and never calls anything but MPI_Initialized.
 */
#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>

#include "caps/caps_internal.h"

/* Sonames tried in order: Open MPI, then MPICH and its derivatives. */
static const char *const caps_mpi_sonames[] = {"libmpi.so.40", "libmpi.so.12"};
static const char *const caps_mpi_env[] = {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK"};

#define CAPS_N_SONAMES (sizeof(caps_mpi_sonames) / sizeof(caps_mpi_sonames[0]))
#define CAPS_N_ENV (sizeof(caps_mpi_env) / sizeof(caps_mpi_env[0]))

typedef int (*caps_mpi_initialized_fn)(int *flag);

static void caps_probe_mpi_library(px_caps *c)
{
    const char *why = "";

    for (size_t i = 0; i < CAPS_N_SONAMES; i++) {
        void *h = dlopen(caps_mpi_sonames[i], RTLD_LAZY | RTLD_LOCAL);

        if (h != NULL) {
            dlclose(h);
            caps_fact_set(c, PX_FACT_MPI_LIBRARY, 1, PX_SRC_MPI, "dlopen(%s) succeeded",
                          caps_mpi_sonames[i]);
            return;
        }
        why = dlerror();
    }
    caps_fact_set(c, PX_FACT_MPI_LIBRARY, 0, PX_SRC_MPI,
                  "neither libmpi.so.40 nor libmpi.so.12 can be loaded (%s)", why ? why : "");
}

static void caps_probe_mpi_launched(px_caps *c)
{
    for (size_t i = 0; i < CAPS_N_ENV; i++) {
        const char *v = getenv(caps_mpi_env[i]);

        if (v != NULL) {
            caps_fact_set(c, PX_FACT_MPI_LAUNCHED, 1, PX_SRC_MPI, "%s=%.40s in the environment",
                          caps_mpi_env[i], v);
            return;
        }
    }
    caps_fact_set(c, PX_FACT_MPI_LAUNCHED, 0, PX_SRC_MPI,
                  "none of OMPI_COMM_WORLD_SIZE, PMI_SIZE, PMIX_RANK is set");
}

/* Returns a handle on a libmpi already loaded in this process, or NULL. */
static void *caps_mpi_loaded(const char **soname)
{
    for (size_t i = 0; i < CAPS_N_SONAMES; i++) {
        void *h = dlopen(caps_mpi_sonames[i], RTLD_LAZY | RTLD_NOLOAD);

        if (h != NULL) {
            *soname = caps_mpi_sonames[i];
            return h;
        }
    }
    return NULL;
}

static void caps_probe_mpi_initialized(px_caps *c)
{
    const char *soname = "";
    void *h = caps_mpi_loaded(&soname);
    caps_mpi_initialized_fn fn;
    int flag = 0;

    if (h == NULL) {
        caps_fact_set(c, PX_FACT_MPI_INITIALIZED, 0, PX_SRC_MPI,
                      "libmpi not loaded in this process");
        return;
    }
    *(void **)&fn = dlsym(h, "MPI_Initialized");
    if (fn == NULL)
        caps_fact_set(c, PX_FACT_MPI_INITIALIZED, 0, PX_SRC_MPI,
                      "%s is loaded but has no MPI_Initialized", soname);
    else if (fn(&flag) != 0)
        caps_fact_set(c, PX_FACT_MPI_INITIALIZED, 0, PX_SRC_MPI,
                      "MPI_Initialized of %s returned an error", soname);
    else
        caps_fact_set(c, PX_FACT_MPI_INITIALIZED, flag != 0, PX_SRC_MPI,
                      "MPI_Initialized of %s says %d", soname, flag);
    dlclose(h);
}

/* Fills mpi_library, mpi_launched and mpi_initialized; never fails. */
void caps_probe_mpi(px_caps *c)
{
    /* Asked first, so the library probe's own load cannot be mistaken for the program's. */
    caps_probe_mpi_initialized(c);
    caps_probe_mpi_library(c);
    caps_probe_mpi_launched(c);
}
