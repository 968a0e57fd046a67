/*
 * domain_kernels.c - the built-in tasks of domains as they run in the chips: the copy
 * kernels between the host heap and a window, the collective kernel, the callables that
 * submit them on the chip's engine, and px_arg_comm, through which every kernel finds its
 * rank's communicator. Registered through the level-3 registry (comm_builtins_register).
 */
#include "comm/domain_internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "platform/platform.h"
#include "runtime/runtime.h"
#include "util/log.h"
#include "util/util.h"
#include "util/wait.h"


/* Copies between device tensor 0 and the window: to_window 1 (comm.write_k, IN tensor) or 0
 * (comm.read_k, OUT tensor); args: tensor, domain, buffer index, byte offset. */
static px_status comm_copy_kernel(const px_task_args *a, int to_window)
{
    px_comm *c = px_arg_comm(a, 1);
    const px_tensor *t = px_arg_tensor(a, 0);
    uint64_t b = px_arg_u64(a, 2), off = px_arg_u64(a, 3);
    size_t n = (size_t)px_arg_numel(a, 0) * px_dtype_size(t->dtype);
    char *win;

    if (c == NULL)
        return PX_EINVAL;
    win = c->data[c->rank] + c->buffers[b].off + off;
    if (to_window)
        memcpy(win, px_arg_data(a, 0), n);
    else
        memcpy(px_arg_data(a, 0), win, n);
    return PX_OK;
}

static px_status comm_write_kernel(px_core_ctx *ctx, const px_task_args *a)
{
    return comm_copy_kernel(a, 1);
}

static px_status comm_read_kernel(px_core_ctx *ctx, const px_task_args *a)
{
    return comm_copy_kernel(a, 0);
}

/* Runs the collective of a comm.coll_k task on c. */
static px_status comm_coll_run(px_comm *c, const px_task_args *a)
{
    uint64_t op = px_arg_u64(a, 1), b = px_arg_u64(a, 2), count = px_arg_u64(a, 3);
    px_dtype dt = (px_dtype)px_arg_u64(a, 4);
    uint64_t x = px_arg_u64(a, 5);
    void *buf;

    if (c == NULL)
        return PX_EINVAL;
    buf = c->data[c->rank] + c->buffers[b].off;
    switch (op) {
    case COMM_OP_ALLREDUCE:
        return px_comm_allreduce(c, buf, count, dt, (px_redop)x);
    case COMM_OP_ALLGATHER:
        return px_comm_allgather(c, buf, count, dt);
    case COMM_OP_REDUCE_SCATTER:
        return px_comm_reduce_scatter(c, buf, count, dt, (px_redop)x);
    case COMM_OP_BROADCAST:
        return px_comm_broadcast(c, buf, count, dt, (int)x);
    case COMM_OP_ALLTOALL:
        return px_comm_alltoall(c, buf, count, dt);
    }
    return px_set_error(PX_EINVAL, "comm.coll: unknown collective %llu", (unsigned long long)op);
}

/* comm.coll_k: domain, op, buffer index, count, dtype, redop or root. A barrier that timed
 * out named the ranks that kept it waiting silent already (coll/barrier.c). */
static px_status comm_coll_kernel(px_core_ctx *ctx, const px_task_args *a)
{
    return comm_coll_run(px_arg_comm(a, 0), a);
}

/* The callables: run kernel k on the call's own args (the chip's orchestration). Their user
 * pointer is the worker's comm_worker (hier_callable_register), as the chip's fork copied it:
 * the kernel ids in it are the same on every chip. */
static px_status comm_submit_own(px_orch *o, const px_task_args *args, px_kernel_id k)
{
    px_task_args a = *args;

    return px_submit(o, k, &a, NULL);
}

static px_status comm_write_callable(px_orch *o, const px_task_args *args, void *user)
{
    return comm_submit_own(o, args, ((const comm_worker *)user)->k_write);
}

static px_status comm_read_callable(px_orch *o, const px_task_args *args, void *user)
{
    return comm_submit_own(o, args, ((const comm_worker *)user)->k_read);
}

static px_status comm_coll_callable(px_orch *o, const px_task_args *args, void *user)
{
    return comm_submit_own(o, args, ((const comm_worker *)user)->k_coll);
}

px_comm *px_arg_comm(const px_task_args *a, int i)
{
    uint64_t v;
    px_comm *c;

    if (a == NULL || i < 0 || i >= a->n || a->a[i].tag != PX_TAG_SCALAR) {
        px_set_error(PX_EINVAL, "px_arg_comm: argument %d is not a scalar from px_args_domain", i);
        return NULL;
    }
    v = a->a[i].v.u64;
    if (v >> 32 != COMM_ARG_MAGIC) {
        px_set_error(PX_EINVAL, "px_arg_comm: argument %d (%#llx) was not made by "
                     "px_args_domain", i, (unsigned long long)v);
        return NULL;
    }
    if ((c = comm_chip_lookup((uint32_t)v)) == NULL)
        px_set_error(PX_EINVAL, "px_arg_comm: domain id %u is not live on chip %d (not a member,"
                     " or released)", (uint32_t)v, px_chip_index());
    return c;
}

px_status comm_builtins_register(comm_worker *cw)
{
    px_worker *w = cw->w;
    px_status st = hier_kernel_register(w, "comm.write_k", comm_write_kernel, NULL, &cw->k_write);
    if (st == PX_OK)
        st = hier_kernel_register(w, "comm.read_k", comm_read_kernel, NULL, &cw->k_read);
    if (st == PX_OK)
        st = hier_kernel_register(w, "comm.coll_k", comm_coll_kernel, NULL, &cw->k_coll);
    if (st == PX_OK)
        st = hier_callable_register(w, "comm.write", comm_write_callable, cw, &cw->c_write);
    if (st == PX_OK)
        st = hier_callable_register(w, "comm.read", comm_read_callable, cw, &cw->c_read);
    if (st == PX_OK)
        st = hier_callable_register(w, "comm.coll", comm_coll_callable, cw, &cw->c_coll);
    return st;
}
