/*
 * mpi_load.h - whether MPI is in use in this process, and the MPI plugin (mpi_ops.h) loaded
 * when it is.
 *
 * MPI is in use by a level-3 worker when PLEXUS_MPI says on, or when it says auto (the
 * default) and the process was started by an MPI launcher (mpirun sets OMPI_COMM_WORLD_SIZE,
 * PMIx launchers PMIX_RANK, Hydra PMI_RANK) or PLEXUS_COMM_TRANSPORT forces mpi. The plugin is
 * PLEXUS_MPI_PLUGIN when set, else libplexus-mpi.so beside the image that holds libplexus
 * (the shared library, or the program it is linked into), in ../lib of it, then in the
 * install's library directory.
 */
#ifndef PX_MPI_LOAD_H
#define PX_MPI_LOAD_H

#include <stddef.h>

#include <plexus/status.h>

#include "mpi/mpi_ops.h"

enum { PX_MPI_AUTO = 0, PX_MPI_ON = 1, PX_MPI_OFF = 2 };

/* PLEXUS_MPI as a mode (PX_MPI_AUTO when unset; the knob's check refuses other values). */
int px_mpi_mode(void);

/*
 * 1 when a worker should run under MPI, with the reason in why ("OMPI_COMM_WORLD_SIZE=2: started
 * by an MPI launcher", "PLEXUS_MPI=on"); 0 with why saying why not. forced_mpi: the comm
 * transport is forced to mpi.
 */
int px_mpi_wanted(int forced_mpi, char *why, size_t n);

/*
 * Loads the plugin (once per process; later calls return the same table). PX_OK with *ops,
 * else PX_ENOTSUP saying which paths were tried, what the loader said and what to do. path
 * (n bytes, may be NULL) receives the file loaded.
 */
px_status px_mpi_load(const px_mpi_ops **ops, char *path, size_t n);

/* What a level-3 worker of this process would do about MPI (doctor): whether it runs under
 * MPI and why, and whether the plugin loads (its file and MPI library, or the error). */
typedef struct px_mpi_info {
    int wanted;
    char why[160];
    int loaded;
    char path[512];
    char library[160];
    char error[1024];
} px_mpi_info;

void px_mpi_describe(int forced_mpi, px_mpi_info *out);

/* The MPI rank the launcher gives this process, read from its environment before MPI starts
 * (OMPI_COMM_WORLD_RANK, PMIX_RANK, PMI_RANK); 0 without a launcher. Forked chips inherit it. */
int px_mpi_launcher_rank(void);

/* What plexus did with MPI in this process: not started, up (a worker's proxy initialised
 * it), done (finalised: it cannot start again). */
enum { PX_MPI_STATE_NONE = 0, PX_MPI_STATE_UP, PX_MPI_STATE_DONE };
int px_mpi_state(void);
void px_mpi_state_set(int state);

#endif
