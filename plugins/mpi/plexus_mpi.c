/*
 * plexus_mpi.c - libplexus-mpi.so, the MPI plugin of plexus (src/mpi/mpi_ops.h): a thin layer
 * over MPI that libplexus dlopens when MPI is in use, so that libplexus itself never needs
 * libmpi. It keeps no state of plexus; every call comes from the worker's proxy thread.
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mpi/mpi_ops.h"

struct px_mpi_req {
    MPI_Request r;
};

static MPI_Comm g_comm = MPI_COMM_NULL; /* a duplicate of the world: our messages only */

static int pm_initialized(void)
{
    int a = 0, b = 0;

    MPI_Initialized(&a);
    MPI_Finalized(&b);
    return a || b;
}

static int pm_init(int *rank, int *size)
{
    int provided = 0, e;

    /* serialized: each worker's proxy is its own thread, one at a time */
    if ((e = MPI_Init_thread(NULL, NULL, MPI_THREAD_SERIALIZED, &provided)) != MPI_SUCCESS)
        return e;
    if (provided < MPI_THREAD_SERIALIZED)
        return MPI_ERR_OTHER; /* the library has no thread support at all */
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    if ((e = MPI_Comm_dup(MPI_COMM_WORLD, &g_comm)) != MPI_SUCCESS)
        return e;
    MPI_Comm_set_errhandler(g_comm, MPI_ERRORS_RETURN);
    MPI_Comm_rank(g_comm, rank);
    MPI_Comm_size(g_comm, size);
    return MPI_SUCCESS;
}

static int pm_finalize(void)
{
    if (g_comm != MPI_COMM_NULL)
        MPI_Comm_free(&g_comm);
    return MPI_Finalize();
}

static void pm_version(char *buf, size_t n)
{
    char v[MPI_MAX_LIBRARY_VERSION_STRING];
    int len = 0;

    MPI_Get_library_version(v, &len);
    v[len < (int)sizeof(v) ? len : (int)sizeof(v) - 1] = '\0';
    v[strcspn(v, "\n,")] = '\0';
    snprintf(buf, n, "%s", v);
}

static void pm_error(int code, char *buf, size_t n)
{
    char s[MPI_MAX_ERROR_STRING];
    int len = 0;

    if (MPI_Error_string(code, s, &len) != MPI_SUCCESS)
        snprintf(s, sizeof(s), "MPI error %d", code);
    snprintf(buf, n, "%s", s);
}

static int pm_req(px_mpi_req **out)
{
    return (*out = malloc(sizeof(**out))) != NULL ? MPI_SUCCESS : MPI_ERR_NO_MEM;
}

static int pm_isend(const void *buf, size_t n, int dst, int tag, px_mpi_req **req)
{
    int e;

    if (n > (size_t)INT32_MAX)
        return MPI_ERR_COUNT;
    if ((e = pm_req(req)) != MPI_SUCCESS)
        return e;
    if ((e = MPI_Isend(buf, (int)n, MPI_BYTE, dst, tag, g_comm, &(*req)->r)) != MPI_SUCCESS) {
        free(*req);
        *req = NULL;
    }
    return e;
}

static int pm_irecv(void *buf, size_t n, int src, int tag, px_mpi_req **req)
{
    int e;

    if (n > (size_t)INT32_MAX)
        return MPI_ERR_COUNT;
    if ((e = pm_req(req)) != MPI_SUCCESS)
        return e;
    if ((e = MPI_Irecv(buf, (int)n, MPI_BYTE, src < 0 ? MPI_ANY_SOURCE : src, tag, g_comm,
                       &(*req)->r)) != MPI_SUCCESS) {
        free(*req);
        *req = NULL;
    }
    return e;
}

static int pm_test(px_mpi_req *req, int *done)
{
    int e = MPI_Test(&req->r, done, MPI_STATUS_IGNORE);

    if (e == MPI_SUCCESS && *done)
        free(req);
    return e;
}

static void pm_cancel(px_mpi_req *req)
{
    if (req == NULL)
        return;
    MPI_Cancel(&req->r);
    MPI_Request_free(&req->r);
    free(req);
}

static int pm_iprobe(int from, int *flag, int *src, int *tag, size_t *n)
{
    MPI_Status s;
    int e = MPI_Iprobe(from < 0 ? MPI_ANY_SOURCE : from, MPI_ANY_TAG, g_comm, flag, &s);
    int count = 0;

    if (e == MPI_SUCCESS && *flag) {
        MPI_Get_count(&s, MPI_BYTE, &count);
        *src = s.MPI_SOURCE;
        *tag = s.MPI_TAG;
        *n = (size_t)count;
    }
    return e;
}

static int pm_recv(void *buf, size_t n, int src, int tag)
{
    if (n > (size_t)INT32_MAX)
        return MPI_ERR_COUNT;
    return MPI_Recv(buf, (int)n, MPI_BYTE, src, tag, g_comm, MPI_STATUS_IGNORE);
}

static int pm_iallgather(const void *in, void *out, size_t n, px_mpi_req **req)
{
    int e;

    if (n > (size_t)INT32_MAX)
        return MPI_ERR_COUNT;
    if ((e = pm_req(req)) != MPI_SUCCESS)
        return e;
    if ((e = MPI_Iallgather(in, (int)n, MPI_BYTE, out, (int)n, MPI_BYTE, g_comm,
                            &(*req)->r)) != MPI_SUCCESS) {
        free(*req);
        *req = NULL;
    }
    return e;
}

static void pm_abort(int code)
{
    MPI_Abort(MPI_COMM_WORLD, code);
}

static const px_mpi_ops pm_ops = {
    .abi = PX_MPI_OPS_ABI,
    .size = sizeof(px_mpi_ops),
    .initialized = pm_initialized,
    .init = pm_init,
    .finalize = pm_finalize,
    .version = pm_version,
    .error = pm_error,
    .isend = pm_isend,
    .irecv = pm_irecv,
    .test = pm_test,
    .cancel = pm_cancel,
    .iprobe = pm_iprobe,
    .recv = pm_recv,
    .iallgather = pm_iallgather,
    .abort = pm_abort,
};

/* The table for ABI `abi`, or NULL when this plugin was built for another one. */
__attribute__((visibility("default"))) const px_mpi_ops *px_mpi_plugin_ops(uint32_t abi)
{
    return abi == PX_MPI_OPS_ABI ? &pm_ops : NULL;
}
