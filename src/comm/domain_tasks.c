/*
 * domain_tasks.c - the tasks on a domain's buffers: copies between the host heap and a rank's
 * window (px_submit_domain_write/read), the orchestration-level collectives
 * (px_submit_allreduce, ...) and the user's own group tasks (px_submit_domain_task). Each is a
 * group on the members whose dependencies come from the addresses that stand for the
 * windows' data (domain_alloc.c reserves them).
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


/* The buffer called name, or -1 (message set). */
static int comm_buffer_index(const px_domain *d, const char *name, const char *what)
{
    for (int i = 0; name != NULL && i < d->msg.nbuffers; i++)
        if (strcmp(d->msg.buffers[i].name, name) == 0)
            return i;
    px_set_error(PX_EINVAL, "%s: domain \"%s\" has no buffer \"%s\"", what, d->msg.name,
                 name ? name : "(null)");
    return -1;
}

/* The dependency view of bytes [off, off + n) of buffer b on every rank, or on one rank. */
static px_tensor comm_dep_view(const px_domain *d, int b, size_t off, size_t n, int rank)
{
    px_tensor t = {.addr = d->vbase, .dtype = PX_U8};
    size_t at = d->msg.buffers[b].off + off;

    if (rank >= 0) {
        t.ndim = 1;
        t.shape[0] = (int64_t)n;
        t.stride[0] = 1;
        t.offset = (int64_t)((size_t)rank * d->msg.data_bytes + at);
    } else {
        t.ndim = 2;
        t.shape[0] = d->msg.n;
        t.shape[1] = (int64_t)n;
        t.stride[0] = (int64_t)d->msg.data_bytes;
        t.stride[1] = 1;
        t.offset = (int64_t)at;
    }
    return t;
}

/* Checks a dense host tensor of `what` whose bytes fit buffer b at off; *n gets its bytes. */
static px_status comm_check_copy(const px_domain *d, int b, size_t off, const px_tensor *t,
                                 const char *what, size_t *n)
{
    size_t end;

    if (t == NULL)
        return px_set_error(PX_EINVAL, "%s: the tensor is NULL", what);
    if (!px_tensor_is_contiguous(t))
        return px_set_error(PX_EINVAL, "%s: the tensor must be contiguous (copy a strided view "
                            "into a contiguous tensor first)", what);
    *n = (size_t)px_tensor_numel(t) * px_dtype_size(t->dtype);
    if (__builtin_add_overflow(off, *n, &end) || end > d->msg.buffers[b].bytes)
        return px_set_error(PX_EINVAL, "%s: %zu bytes at offset %zu do not fit buffer \"%s\" "
                            "of domain \"%s\" (%zu bytes)", what, *n, off,
                            d->msg.buffers[b].name, d->msg.name,
                            (size_t)d->msg.buffers[b].bytes);
    return PX_OK;
}

/* Submits a copy: a one-chip group on rank's chip with the dependency view of the bytes. */
static px_status comm_copy(px_orch *o, px_domain *d, int rank, const char *buffer, size_t off,
                           px_tensor *t, int write, px_task_id *id)
{
    const char *what = write ? "px_submit_domain_write" : "px_submit_domain_read";
    px_task_args a, deps;
    px_tensor dep;
    px_status st = comm_check_domain(d, what);
    int b;
    size_t n = 0;

    if (st != PX_OK)
        return st;
    if (rank < 0 || rank >= d->msg.n)
        return px_set_error(PX_EINVAL, "%s: rank %d is not a rank of domain \"%s\" (0..%d)",
                            what, rank, d->msg.name, d->msg.n - 1);
    if (d->mpos[rank] < 0)
        return px_set_error(PX_EINVAL, "%s: rank %d of domain \"%s\" is chip %d of host %d: "
                            "copy to and from it on that host", what, rank, d->msg.name,
                            d->chips[rank], d->hosts != NULL ? d->hosts[rank] : -1);
    if ((b = comm_buffer_index(d, buffer, what)) < 0)
        return PX_EINVAL;
    if ((st = comm_check_copy(d, b, off, t, what, &n)) != PX_OK)
        return st;
    px_args_init(&a);
    if (write)
        px_args_in(&a, t);
    else
        px_args_out(&a, t);
    px_args_domain(&a, d);
    px_args_scalar_u64(&a, (uint64_t)b);
    px_args_scalar_u64(&a, off);
    dep = comm_dep_view(d, b, off, n, rank);
    px_args_init(&deps);
    if (write)
        px_args_out(&deps, &dep);
    else
        px_args_in(&deps, &dep);
    return comm_submit(o, d, write ? d->cw->c_write : d->cw->c_read, &a,
                       &d->mem[d->mpos[rank]], 1, &deps, id);
}

px_status px_submit_domain_write(px_orch *o, px_domain *d, int rank, const char *buffer,
                                 size_t off, const px_tensor *src, px_task_id *id)
{
    px_tensor t;

    if (src == NULL)
        return px_set_error(PX_EINVAL, "px_submit_domain_write: the tensor is NULL");
    t = *src;
    return comm_copy(o, d, rank, buffer, off, &t, 1, id);
}

px_status px_submit_domain_read(px_orch *o, px_domain *d, int rank, const char *buffer,
                                size_t off, px_tensor *dst, px_task_id *id)
{
    return comm_copy(o, d, rank, buffer, off, dst, 0, id);
}

/* Submits c as a group on this worker's members, member i with a[its rank] (a: n entries,
 * one per rank; another host submits the others'). */
static px_status comm_submit_members(px_orch *o, px_domain *d, px_callable_id c,
                                     px_task_args *a, const px_task_args *deps, unsigned flags,
                                     px_task_id *id)
{
    px_task_args *mine;
    px_status st;

    if (d->nmem == d->msg.n)
        return comm_submit_flags(o, d, c, a, d->mem, d->nmem, deps, flags, id);
    if ((mine = calloc((size_t)d->nmem, sizeof(*mine))) == NULL)
        return px_set_error(PX_ENOMEM, "out of host memory");
    for (int i = 0; i < d->nmem; i++)
        mine[i] = a[d->mrank[i]];
    st = comm_submit_flags(o, d, c, mine, d->mem, d->nmem, deps, flags, id);
    free(mine);
    return st;
}

/* px_submit_domain_task and its resilient form (what names it, flags for the group). */
static px_status comm_domain_task(px_orch *o, px_domain *d, px_callable_id c,
                                  const px_task_args *per_rank, const char *what,
                                  unsigned flags, px_task_id *id)
{
    px_task_args *a, deps;
    px_tensor all;
    px_status st = comm_check_domain(d, what);

    if (st != PX_OK)
        return st;
    if ((a = calloc((size_t)d->msg.n, sizeof(*a))) == NULL)
        return px_set_error(PX_ENOMEM, "%s: out of host memory", what);
    for (int r = 0; r < d->msg.n && st == PX_OK; r++) {
        if (per_rank != NULL)
            a[r] = per_rank[r];
        else
            px_args_init(&a[r]);
        if (a[r].n >= PX_MAX_ARGS)
            st = px_set_error(PX_EINVAL, "%s: rank %d has %d arguments; the domain argument "
                              "needs one more (at most %d)", what, r, a[r].n, PX_MAX_ARGS);
        else
            px_args_domain(&a[r], d);
    }
    all = (px_tensor){.addr = d->vbase, .dtype = PX_U8, .ndim = 1,
                      .shape = {(int64_t)d->vbytes}, .stride = {1}};
    px_args_init(&deps);
    px_args_inout(&deps, &all);
    if (st == PX_OK)
        st = comm_submit_members(o, d, c, a, &deps, flags, id);
    free(a);
    return st;
}

px_status px_submit_domain_task(px_orch *o, px_domain *d, px_callable_id c,
                                const px_task_args *per_rank, px_task_id *id)
{
    return comm_domain_task(o, d, c, per_rank, "px_submit_domain_task", 0, id);
}

px_status px_submit_domain_task_resilient(px_orch *o, px_domain *d, px_callable_id c,
                                          const px_task_args *per_rank, px_task_id *id)
{
    return comm_domain_task(o, d, c, per_rank, "px_submit_domain_task_resilient",
                            HIER_GROUP_SURVIVE, id);
}

/* Submits collective op on count elements of buffer on every member. */
static px_status comm_coll(px_orch *o, px_domain *d, const char *what, uint64_t op,
                           const char *buffer, size_t count, size_t blocks, px_dtype dt,
                           uint64_t x, px_task_id *id)
{
    px_task_args *a, deps;
    px_tensor dep;
    size_t es = px_dtype_size(dt), bytes;
    px_status st = comm_check_domain(d, what);
    int b;

    if (st != PX_OK)
        return st;
    if ((b = comm_buffer_index(d, buffer, what)) < 0)
        return PX_EINVAL;
    if (es == 0)
        return px_set_error(PX_EINVAL, "%s: dtype %d is not valid", what, (int)dt);
    if ((op == COMM_OP_ALLREDUCE || op == COMM_OP_REDUCE_SCATTER) &&
        ((dt != PX_F32 && dt != PX_F64 && dt != PX_I32 && dt != PX_I64) || x > PX_OP_MAX))
        return px_set_error(PX_EINVAL, "%s: reduction %llu on %s: reductions take sum, prod, "
                            "min or max on f32, f64, i32 or i64", what, (unsigned long long)x,
                            px_dtype_name(dt));
    if (op == COMM_OP_BROADCAST && x >= (uint64_t)d->msg.n)
        return px_set_error(PX_EINVAL, "%s: root %lld is not a rank of domain \"%s\" (0..%d)",
                            what, (long long)(int64_t)x, d->msg.name, d->msg.n - 1);
    if (__builtin_mul_overflow(count, blocks, &bytes) ||
        __builtin_mul_overflow(bytes, es, &bytes) || bytes > d->msg.buffers[b].bytes)
        return px_set_error(PX_EINVAL, "%s: %zu x %zu elements of %s do not fit buffer \"%s\" "
                            "of domain \"%s\" (%zu bytes)", what, blocks, count,
                            px_dtype_name(dt), buffer, d->msg.name,
                            (size_t)d->msg.buffers[b].bytes);
    if ((a = calloc((size_t)d->msg.n, sizeof(*a))) == NULL)
        return px_set_error(PX_ENOMEM, "%s: out of host memory", what);
    for (int r = 0; r < d->msg.n; r++) {
        px_args_init(&a[r]);
        px_args_domain(&a[r], d);
        px_args_scalar_u64(&a[r], op);
        px_args_scalar_u64(&a[r], (uint64_t)b);
        px_args_scalar_u64(&a[r], count);
        px_args_scalar_u64(&a[r], (uint64_t)dt);
        px_args_scalar_u64(&a[r], x);
    }
    dep = comm_dep_view(d, b, 0, bytes == 0 ? 1 : bytes, -1);
    px_args_init(&deps);
    px_args_inout(&deps, &dep);
    st = comm_submit_members(o, d, d->cw->c_coll, a, &deps, 0, id);
    free(a);
    return st;
}

px_status px_submit_allreduce(px_orch *o, px_domain *d, const char *buffer, size_t count,
                              px_dtype dt, px_redop op, px_task_id *id)
{
    return comm_coll(o, d, "px_submit_allreduce", COMM_OP_ALLREDUCE, buffer, count, 1, dt,
                     (uint64_t)op, id);
}

px_status px_submit_allgather(px_orch *o, px_domain *d, const char *buffer, size_t count,
                              px_dtype dt, px_task_id *id)
{
    return comm_coll(o, d, "px_submit_allgather", COMM_OP_ALLGATHER, buffer, count,
                     (size_t)px_domain_size(d), dt, 0, id);
}

px_status px_submit_reduce_scatter(px_orch *o, px_domain *d, const char *buffer, size_t count,
                                   px_dtype dt, px_redop op, px_task_id *id)
{
    return comm_coll(o, d, "px_submit_reduce_scatter", COMM_OP_REDUCE_SCATTER, buffer, count,
                     (size_t)px_domain_size(d), dt, (uint64_t)op, id);
}

px_status px_submit_broadcast(px_orch *o, px_domain *d, const char *buffer, size_t count,
                              px_dtype dt, int root, px_task_id *id)
{
    return comm_coll(o, d, "px_submit_broadcast", COMM_OP_BROADCAST, buffer, count, 1, dt,
                     (uint64_t)root, id);
}

px_status px_submit_alltoall(px_orch *o, px_domain *d, const char *buffer, size_t count,
                             px_dtype dt, px_task_id *id)
{
    return comm_coll(o, d, "px_submit_alltoall", COMM_OP_ALLTOALL, buffer, count,
                     (size_t)px_domain_size(d), dt, 0, id);
}
