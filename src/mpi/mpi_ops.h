/*
 * mpi_ops.h - the contract between libplexus and its MPI plugin (libplexus-mpi.so).
 *
 * libplexus never links libmpi: a program that never runs under MPI starts on a machine
 * without an MPI library. When MPI is in use (mpi_load.c says when), the worker dlopens the
 * plugin, asks it for this table by its ABI number and checks the answer's abi and size; the
 * plugin is a thin layer over MPI (plugins/mpi/plexus_mpi.c) and calls nothing of libplexus.
 * Every function is called by one thread at a time: the proxy of the worker that runs under
 * MPI (comm/proxy/), the only thread of the process that calls MPI while it runs (each
 * worker's proxy is its own thread, hence MPI_THREAD_SERIALIZED), and at the process's exit
 * the thread that finalises it.
 *
 * Calls return 0 or an MPI error code (errors return: the plugin sets MPI_ERRORS_RETURN on
 * its communicator); error() words a code. Requests are the plugin's own objects, freed by
 * test() when it reports them complete (or by cancel()).
 */
#ifndef PX_MPI_OPS_H
#define PX_MPI_OPS_H

#include <stddef.h>
#include <stdint.h>

#define PX_MPI_OPS_ABI 2u
#define PX_MPI_PLUGIN_SYMBOL "px_mpi_plugin_ops"
#define PX_MPI_PLUGIN_NAME "libplexus-mpi.so"

typedef struct px_mpi_req px_mpi_req;

typedef struct px_mpi_ops {
    uint32_t abi;          /* PX_MPI_OPS_ABI */
    uint32_t size;         /* sizeof(px_mpi_ops) as the plugin was built */
    /* MPI_Initialized or MPI_Finalized: someone else initialised MPI in this process */
    int (*initialized)(void);
    /* MPI_Init_thread(SERIALIZED) on the calling thread; *rank, *size of the world */
    int (*init)(int *rank, int *size);
    int (*finalize)(void);
    /* the library's version (MPI_Get_library_version, first line) */
    void (*version)(char *buf, size_t n);
    void (*error)(int code, char *buf, size_t n);
    int (*isend)(const void *buf, size_t n, int dst, int tag, px_mpi_req **req);
    int (*irecv)(void *buf, size_t n, int src, int tag, px_mpi_req **req);
    /* *done 1 when complete (the request is freed then) */
    int (*test)(px_mpi_req *req, int *done);
    void (*cancel)(px_mpi_req *req);
    /* a message waiting from host `from` (-1: any): *flag, and its source, tag and bytes */
    int (*iprobe)(int from, int *flag, int *src, int *tag, size_t *n);
    int (*recv)(void *buf, size_t n, int src, int tag);
    /* nonblocking allgather of n bytes per rank (out: size * n bytes) */
    int (*iallgather)(const void *in, void *out, size_t n, px_mpi_req **req);
    void (*abort)(int code);
} px_mpi_ops;

typedef const px_mpi_ops *(*px_mpi_plugin_fn)(uint32_t abi);

#endif
