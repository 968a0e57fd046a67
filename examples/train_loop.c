/*
 * train_loop.c - the level-3 example of a domain that survives a member's death: a
 * data-parallel loop over every chip, in which one chip can be killed at a chosen iteration
 * (--kill-chip N --at-iter K); the survivors shrink the domain and finish every iteration.
 *
 * Every rank's window holds the model's parameters p (size floats, the same on every rank),
 * its gradient g and its iteration count. One iteration is one group task (train.step) on the
 * domain: rank r computes g[i] = p[i] - t_c[i] against its chip c's data shard t_c, the ranks
 * allreduce g (sum, folded in rank order 0, 1, ..., n-1, as every plexus reduction is), and
 * every rank updates p[i] -= 0.25 * g[i] / n and counts the iteration. The chip to kill
 * raises SIGKILL on itself when its count reaches K, before it contributes: the run fails
 * with PX_EPEERDEAD naming it and its pid. The orchestration then, in one new run, shrinks
 * the domain (the survivors' windows carry p and the count: K), reads the count and p back,
 * and runs iterations K .. iters-1 over the survivors (ranks dense in the old order, each
 * keeping its chip's shard).
 *
 * The check: the carried count is K and the carried p bit-identical to the host's at
 * iteration K; the survivors' final p is bit-identical on every survivor, and to a run of the
 * survivors from iteration K on (a domain of those chips allocated from scratch, p set to the
 * host's iteration-K parameters), and to the host's computation of the same sequence (all
 * chips for iterations 0 .. K-1, the survivors after, same fold order). With no --kill-chip
 * every iteration runs on all chips and the check is against the host.
 * --iters below 2 means 100; --at-iter defaults to iters / 2.
 *
 * The runs, with a chip to kill: 1. the reference (the survivors from scratch, before any
 * chip dies), 2. the set-up (the domain of every chip, p0 written), 3. the loop (the death),
 * 4. the shrink and the survivors' iterations. Each run with DFX on (--dfx) writes the
 * outputs anew, so the set left in --out DIR is run 4's: on each survivor's track the
 * orchestration's revoke, agreement (the dead chip excluded, with why) and shrink, then the
 * survivors' iterations; dfx.json's domains name the dead chip with why (over hosts: on every
 * host's survivors, the chip named by host and chip). Without a chip to kill, runs 2 and 3.
 *
 * With --shrink kernel the whole loop is one resilient domain task (train.loop,
 * px_submit_domain_task_resilient): each rank's kernel runs every iteration itself; when the
 * allreduce fails because the chip died, each survivor's kernel shrinks its communicator
 * (px_comm_shrink: the survivors agree among themselves, in the kernel) and redoes the
 * iteration on the new one, over the same windows. The task succeeds on the survivors; the
 * next run shrinks the domain from the orchestration (the same survivors) only to read the
 * results back: its DFX outputs are the ones left (the reference ran first, as above).
 * Buffer it keeps the count, each rank's kernel shrinks and its final communicator's size.
 *
 * Under mpirun the domain spans every host's chips, ranks host-major (rank = host * chips +
 * chip), rank r's shard being r; each host writes, reads back and checks its own ranks.
 * --kill-chip H:C kills chip C of host H; every host's orchestration shrinks (a host may see
 * its run fail with PX_EREVOKED: the dead chip's host shrank first). The kernel-side shrink
 * works across hosts too (the MPI proxies carry its agreement).
 */
#include "examples.h"

#include <float.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define TL_ITERS_DEFAULT 100

typedef struct tl_state {
    px_example_opts opts;
    int n, iters, at, kill;          /* kill: chip to kill (of host kill_host), or -1 */
    int kill_host, kill_name;        /* its host, and its name in the domain's spec */
    int hosts, host, nl, r0;         /* this host's ranks: r0 .. r0 + nl - 1 (host-major) */
    int in_kernel;                   /* --shrink kernel */
    int64_t size;
    int chips[PX_COMM_MAX_RANKS];    /* the first domain's: rank r's data shard is r */
    int surv[PX_COMM_MAX_RANKS], nsurv;
    px_domain *d, *nd;
    float *p0;                       /* size: initial parameters */
    float *snap;                     /* size: the host's p at iteration at (the reference's
                                      * start; the shrink must carry the same) */
    float *carried;                  /* size: p as the shrink carried it */
    float *out;                      /* n x size: every rank's final p */
    float *ref;                      /* n x size: the from-scratch survivors' run's final p */
    int64_t cnt[3];                  /* buffer it of rank 0 (runs' arg 1): the iteration
                                      * count (run 3: carried), train.loop's kernel shrinks
                                      * and its final communicator's size */
    int shrunk_gen;
    char info[400];
} tl_state;

static px_kernel_id tl_k_step, tl_k_loop;
static px_callable_id tl_c_step, tl_c_loop;

/* Chip c's data shard, element i (exact in floats). */
static float tl_target(int c, int64_t i)
{
    return (float)((i * 7 + c * 13) % 101) / 16.0f;
}

/* One update of p from the folded gradient sum over n ranks (the kernel and the host's
 * reference both call it, so both round alike). */
static void tl_update(float *p, const float *gsum, int64_t size, int n)
{
    for (int64_t i = 0; i < size; i++)
        p[i] -= 0.25f * gsum[i] / (float)n;
}

/* train.step on one rank: args (at, die, shard, domain): die is 1 on the chip to kill,
 * shard its data shard (the chip's rank in the first domain). */
/* The domain's buffers p, g (with their bytes) and it, or PX_EINVAL naming the kernel. */
static px_status tl_buffers(px_comm *c, const char *what, float **p, size_t *pb, float **g,
                            size_t *gb, uint64_t **it)
{
    *p = px_comm_buffer(c, "p", pb);
    *g = px_comm_buffer(c, "g", gb);
    *it = px_comm_buffer(c, "it", NULL);
    if (*p == NULL || *g == NULL || *it == NULL)
        return px_set_error(PX_EINVAL, "%s: domain \"%s\" lacks buffer p, g or it", what,
                            px_comm_name(c));
    return PX_OK;
}

/* One iteration's gradient against shard, allreduced over c (a chip with die set dies first
 * at iteration at). */
static px_status tl_gradient(px_comm *c, const float *p, size_t pb, float *g, size_t gb,
                             uint64_t it, uint64_t at, uint64_t die, int shard)
{
    if (die != 0 && it == at)
        raise(SIGKILL); /* the fault this example recovers from */
    for (size_t i = 0; i < pb / sizeof(float); i++)
        g[i] = p[i] - tl_target(shard, (int64_t)i);
    return px_comm_allreduce(c, g, gb / sizeof(float), PX_F32, PX_OP_SUM);
}

static px_status tl_step_kernel(px_core_ctx *ctx, const px_task_args *a)
{
    px_comm *c = px_arg_comm(a, px_arg_count(a) - 1);
    uint64_t at = px_arg_u64(a, 0), die = px_arg_u64(a, 1);
    int shard = (int)px_arg_i64(a, 2);
    size_t pb, gb;
    float *p, *g;
    uint64_t *it;
    px_status st;

    (void)ctx;
    if (c == NULL)
        return PX_EINVAL;
    if ((st = tl_buffers(c, "train.step", &p, &pb, &g, &gb, &it)) != PX_OK ||
        (st = tl_gradient(c, p, pb, g, gb, *it, at, die, shard)) != PX_OK)
        return st;
    tl_update(p, g, (int64_t)(pb / sizeof(float)), px_comm_size(c));
    ++*it;
    return PX_OK;
}

static px_status tl_step_callable(px_orch *o, const px_task_args *args, void *user)
{
    px_task_args a = *args;

    (void)user;
    return px_submit(o, tl_k_step, &a, NULL);
}

/*
 * After a shrink the survivors agree on where they are: a survivor whose allreduce failed
 * while its peers' passed (the death, or a peer's revoke as it began its shrink, ended its
 * wait before the last signal came: one still on its way through the MPI proxies cannot be
 * carried out before) is one iteration behind. It takes the iteration count and p of those
 * ahead: a MAX of the counts, then a MAX of p in which it gives -FLT_MAX (a MAX of identical
 * values: bit for bit theirs). Its own p comes back if that fails (shrink again).
 */
static px_status tl_realign(px_comm *c, float *p, size_t pb, float *g, uint64_t *it)
{
    size_t n = pb / sizeof(float);
    float *mine = NULL;
    px_status st;

    g[0] = (float)*it;
    if ((st = px_comm_allreduce(c, g, 1, PX_F32, PX_OP_MAX)) != PX_OK)
        return st;
    if ((uint64_t)g[0] > *it) {
        if ((mine = malloc(pb)) == NULL)
            return px_set_error(PX_ENOMEM, "train.loop: out of memory");
        memcpy(mine, p, pb);
        for (size_t i = 0; i < n; i++)
            p[i] = -FLT_MAX;
    }
    st = px_comm_allreduce(c, p, n, PX_F32, PX_OP_MAX);
    if (st == PX_OK)
        *it = (uint64_t)g[0];
    else if (mine != NULL)
        memcpy(p, mine, pb);
    free(mine);
    return st;
}

/* train.loop on one rank: args (iters, at, die, shard, domain): every iteration in this
 * kernel; after a death the survivors shrink here (px_comm_shrink), agree on where they are
 * (tl_realign) and redo the iteration (p changes only after an allreduce that succeeded). */
static px_status tl_loop_kernel(px_core_ctx *ctx, const px_task_args *a)
{
    px_comm *c = px_arg_comm(a, px_arg_count(a) - 1), *nc;
    uint64_t iters = px_arg_u64(a, 0), at = px_arg_u64(a, 1), die = px_arg_u64(a, 2);
    int shard = (int)px_arg_i64(a, 3), realign = 0;
    size_t pb, gb;
    float *p, *g;
    uint64_t *it;
    px_status st;

    (void)ctx;
    if (c == NULL)
        return PX_EINVAL;
    if ((st = tl_buffers(c, "train.loop", &p, &pb, &g, &gb, &it)) != PX_OK)
        return st;
    it[1] = 0;
    while (*it < iters || realign) {
        st = realign ? tl_realign(c, p, pb, g, it)
                     : tl_gradient(c, p, pb, g, gb, *it, at, die, shard);
        if (st == PX_EPEERDEAD || st == PX_EREVOKED) {
            for (int tries = 0; (st = px_comm_shrink(c, &nc)) == PX_EPEERDEAD && tries < 3;
                 tries++)
                ; /* a death during the shrink: every survivor retries alike */
            if (st != PX_OK)
                return st;
            c = nc;
            it[1]++;
            realign = 1;
            continue;
        }
        if (st != PX_OK)
            return st;
        if (realign) {
            realign = 0;
            continue;
        }
        tl_update(p, g, (int64_t)(pb / sizeof(float)), px_comm_size(c));
        ++*it;
    }
    it[2] = (uint64_t)px_comm_size(c);
    return PX_OK;
}

static px_status tl_loop_callable(px_orch *o, const px_task_args *args, void *user)
{
    px_task_args a = *args;

    (void)user;
    return px_submit(o, tl_k_loop, &a, NULL);
}

static void tl_fini(void *state)
{
    tl_state *s = state;

    if (s == NULL)
        return;
    free(s->p0);
    free(s->snap);
    free(s->carried);
    free(s->out);
    free(s->ref);
    free(s);
}

/* Fills s from the options and checks them. */
static px_status tl_setup(tl_state *s, const px_example_opts *o)
{
    s->opts = *o;
    s->size = o->size;
    s->iters = o->iters > 1 ? o->iters : TL_ITERS_DEFAULT;
    s->at = o->at_iter > 0 ? o->at_iter : s->iters / 2;
    s->kill = o->kill_chip - 1;
    s->kill_host = o->kill_host;
    s->in_kernel = o->shrink != NULL && strcmp(o->shrink, "kernel") == 0;
    if (o->shrink != NULL && !s->in_kernel && strcmp(o->shrink, "orchestration") != 0)
        return px_set_error(PX_EINVAL, "train_loop: --shrink %s is not a place to shrink: "
                            "use orchestration or kernel", o->shrink);
    if (s->kill >= 0 && (s->at < 1 || s->at >= s->iters))
        return px_set_error(PX_EINVAL, "train_loop: --at-iter %d is out of range: use 1..%d "
                            "(iterations: %d)", s->at, s->iters - 1, s->iters);
    if (s->size < 1 || s->size > (1 << 20))
        return px_set_error(PX_EINVAL, "train_loop: size %lld is out of range: use 1..%d",
                            (long long)s->size, 1 << 20);
    return PX_OK;
}

/* The ranks of every host (host-major; the hosts are known once the worker runs) and the
 * chip to kill among them. */
static px_status tl_ranks(tl_state *s, px_worker *w)
{
    px_status st;

    s->hosts = px_worker_hosts(w);
    s->host = px_worker_host(w);
    if ((st = px_example_ranks(w, "train_loop", &s->n, &s->nl, &s->r0, s->chips)) != PX_OK)
        return st;
    if (s->n < 2)
        return px_set_error(PX_EINVAL, "train_loop: needs 2..%d chips, got %d; pass --chips N",
                            PX_COMM_MAX_RANKS, s->n);
    if (s->hosts == 1 && s->kill_host > 0)
        return px_set_error(PX_EINVAL, "train_loop: --kill-chip %d:%d is not a chip: the job "
                            "has one host (H:C names chip C of host H under mpirun): pass "
                            "--kill-chip C (0..%d)", s->kill_host, s->kill, s->nl - 1);
    if (s->hosts == 1 && s->kill >= s->nl)
        return px_set_error(PX_EINVAL, "train_loop: --kill-chip %d is not a chip (0..%d)",
                            s->kill, s->nl - 1);
    if (s->kill >= s->nl || s->kill_host >= s->hosts)
        return px_set_error(PX_EINVAL, "train_loop: --kill-chip %d:%d is not a chip: the job "
                            "has %d hosts (0..%d) of %d chips each (0..%d)", s->kill_host,
                            s->kill, s->hosts, s->hosts - 1, s->nl, s->nl - 1);
    if (s->kill >= 0 && s->hosts > 1 && s->nl < 2)
        return px_set_error(PX_EINVAL, "train_loop: --kill-chip over %d hosts needs 2 chips "
                            "or more per host (--chips 2): the host of the chip killed keeps "
                            "a member of the domain", s->hosts);
    s->kill_name = s->kill < 0 ? -1 : s->chips[s->kill_host * s->nl + s->kill];
    return PX_OK;
}

static px_status tl_reg(px_worker *w, const px_example_opts *o, void **state)
{
    tl_state *s = calloc(1, sizeof(*s));
    px_status st;

    if (s == NULL)
        return px_set_error(PX_ENOMEM, "train_loop: cannot allocate its state");
    st = tl_setup(s, o);
    if (st == PX_OK)
        st = px_kernel_register(w, "train.step", tl_step_kernel, NULL, &tl_k_step);
    if (st == PX_OK)
        st = px_callable_register(w, "train.step", tl_step_callable, &tl_c_step);
    if (st == PX_OK)
        st = px_kernel_register(w, "train.loop", tl_loop_kernel, NULL, &tl_k_loop);
    if (st == PX_OK)
        st = px_callable_register(w, "train.loop", tl_loop_callable, &tl_c_loop);
    if (st != PX_OK) {
        tl_fini(s);
        return st;
    }
    *state = s;
    return PX_OK;
}

/* The data shard of the chip named c in a domain's spec: its rank in the first domain. */
static int tl_shard(const tl_state *s, int c)
{
    for (int r = 0; r < s->n; r++)
        if (s->chips[r] == c)
            return r;
    return -1;
}

/* 1 when the chip named c is this host's (each host writes, reads and checks its own). */
static int tl_local(const tl_state *s, int c)
{
    int r = tl_shard(s, c);

    return r >= 0 && r / s->nl == s->host;
}

/* The chip to kill, as messages name it ("chip C", or "chip C of host H" over hosts). */
static const char *tl_kill_name(const tl_state *s, char *buf, size_t n)
{
    if (s->hosts > 1)
        snprintf(buf, n, "chip %d of host %d", s->kill, s->kill_host);
    else
        snprintf(buf, n, "chip %d", s->kill);
    return buf;
}

/* A domain of chips (n) called name with buffers p, g (size floats) and it (three u64: the
 * iteration count, train.loop's kernel shrinks and its final communicator's size). */
static px_status tl_alloc(px_orch *o, const tl_state *s, const char *name, const int *chips,
                          int n, px_domain **d)
{
    size_t fb = (size_t)s->size * sizeof(float);
    px_domain_buffer b[3] = {{"p", fb}, {"g", fb}, {"it", 24}};
    size_t win = 2 * ((fb + 63) / 64 * 64) + 64;
    px_domain_spec spec = {PX_DOMAIN_SPEC_HEADER, .name = name, .chips = chips, .nchips = n,
                           .window_bytes = win, .buffers = b, .nbuffers = 3};

    return px_domain_alloc(o, &spec, d);
}

/* Submits iterations from .. iters-1 on d. */
static px_status tl_steps(px_orch *o, const tl_state *s, px_domain *d, int from)
{
    px_task_args per[PX_COMM_MAX_RANKS];
    px_status st = PX_OK;

    for (int r = 0; r < px_domain_size(d); r++) {
        int c = px_domain_chip(d, r);

        px_args_init(&per[r]);
        px_args_scalar_u64(&per[r], (uint64_t)s->at);
        px_args_scalar_u64(&per[r], c == s->kill_name);
        px_args_scalar_i64(&per[r], tl_shard(s, c));
    }
    for (int k = from; st == PX_OK && k < s->iters; k++)
        st = px_submit_domain_task(o, d, tl_c_step, per, NULL);
    return st;
}

/* Writes host tensor arg 0 (p, size floats) and arg 1 (the count) into every rank of d on
 * this host. */
static px_status tl_write_all(px_orch *o, const tl_state *s, const px_task_args *args,
                              px_domain *d)
{
    px_status st = PX_OK;

    for (int r = 0; st == PX_OK && r < px_domain_size(d); r++) {
        if (!tl_local(s, px_domain_chip(d, r)))
            continue;
        st = px_submit_domain_write(o, d, r, "p", 0, px_arg_tensor(args, 0), NULL);
        if (st == PX_OK)
            st = px_submit_domain_write(o, d, r, "it", 0, px_arg_tensor(args, 1), NULL);
    }
    return st;
}

/* Reads the p of every rank of d on this host into its row of arg 2 (n x size). */
static px_status tl_read_all(px_orch *o, const tl_state *s, const px_task_args *args,
                             px_domain *d)
{
    const int64_t row[1] = {s->size};
    px_status st = PX_OK;

    for (int r = 0; st == PX_OK && r < px_domain_size(d); r++) {
        px_tensor v;

        if (!tl_local(s, px_domain_chip(d, r)))
            continue;
        st = px_tensor_view(px_arg_tensor(args, 2), 1, row, NULL, (int64_t)r * s->size, &v);
        if (st == PX_OK)
            st = px_submit_domain_read(o, d, r, "p", 0, &v, NULL);
    }
    return st;
}

/* The set-up run: the domain of every chip, p0 and count 0 written; then the loop (with a
 * chip to kill: it fails with PX_EPEERDEAD). */
static px_status tl_orch_setup(px_orch *o, const px_task_args *args, void *state)
{
    tl_state *s = state;
    px_status st = tl_alloc(o, s, "train", s->chips, s->n, &s->d);

    if (st == PX_OK) {
        px_example_domain_info(s->d, s->chips, s->info, sizeof(s->info));
        st = tl_write_all(o, s, args, s->d);
    }
    return st;
}

static px_status tl_orch_loop(px_orch *o, const px_task_args *args, void *state)
{
    tl_state *s = state;
    px_status st = tl_steps(o, s, s->d, 0);

    return st == PX_OK ? tl_read_all(o, s, args, s->d) : st;
}

/* --shrink kernel, run 2: the whole loop as one resilient task. */
static px_status tl_orch_kloop(px_orch *o, const px_task_args *args, void *state)
{
    tl_state *s = state;
    px_task_args per[PX_COMM_MAX_RANKS];

    (void)args;
    for (int r = 0; r < px_domain_size(s->d); r++) {
        int c = px_domain_chip(s->d, r);

        px_args_init(&per[r]);
        px_args_scalar_u64(&per[r], (uint64_t)s->iters);
        px_args_scalar_u64(&per[r], (uint64_t)s->at);
        px_args_scalar_u64(&per[r], c == s->kill_name);
        px_args_scalar_i64(&per[r], tl_shard(s, c));
    }
    return px_submit_domain_task_resilient(o, s->d, tl_c_loop, per, NULL);
}

/* The survivors of the kill as the shrink must keep them (the reference runs on them before
 * the loop): every chip of the first domain but the one killed (every chip without a kill),
 * in rank order. */
static void tl_plan_survivors(tl_state *s)
{
    s->nsurv = 0;
    for (int r = 0; r < s->n; r++)
        if (s->chips[r] != s->kill_name)
            s->surv[s->nsurv++] = s->chips[r];
}

/* PX_OK when shrunk domain nd kept the planned survivors in their order, else PX_ESTATE. */
static px_status tl_check_survivors(const tl_state *s, const px_domain *nd)
{
    if (px_domain_size(nd) != s->nsurv)
        return px_set_error(PX_ESTATE, "train_loop: the shrink kept %d ranks, expected %d (every "
                            "chip but the one killed)", px_domain_size(nd), s->nsurv);
    for (int r = 0; r < s->nsurv; r++)
        if (px_domain_chip(nd, r) != s->surv[r])
            return px_set_error(PX_ESTATE, "train_loop: the shrink made chip %d rank %d, "
                                "expected chip %d (the survivors in their old rank order)",
                                px_domain_chip(nd, r), r, s->surv[r]);
    return PX_OK;
}

/* Shrink; read the carried p (this host's first survivor) into arg 0 and the count into
 * arg 1 (and, --shrink kernel, every survivor's p into arg 2: its kernels finished). */
static px_status tl_shrink(px_orch *o, const px_task_args *args, tl_state *s)
{
    px_tensor tp, tc;
    int lr = 0;
    px_status st = px_domain_shrink(o, s->d, &s->nd);

    for (int tries = 1; st == PX_EPEERDEAD && tries < 3; tries++) /* a death during it */
        st = px_domain_shrink(o, s->d, &s->nd);
    if (st != PX_OK)
        return st;
    /* the old domain can only be released: everything of it goes, the dead member's too */
    if ((st = px_domain_release(s->d)) != PX_OK)
        return st;
    s->d = NULL;
    s->shrunk_gen = px_domain_generation(s->nd);
    if ((st = tl_check_survivors(s, s->nd)) != PX_OK)
        return st;
    for (int r = s->nsurv - 1; r >= 0; r--)
        if (tl_local(s, s->surv[r]))
            lr = r;
    tp = *px_arg_tensor(args, 0);
    tc = *px_arg_tensor(args, 1);
    st = px_submit_domain_read(o, s->nd, lr, "p", 0, &tp, NULL);
    if (st == PX_OK)
        st = px_submit_domain_read(o, s->nd, lr, "it", 0, &tc, NULL);
    if (st == PX_OK && s->in_kernel) /* the kernels finished: every rank's p */
        st = tl_read_all(o, s, args, s->nd);
    return st;
}

/* --shrink kernel, run 3: the orchestration's shrink, to read the results back. */
static px_status tl_orch_shrink(px_orch *o, const px_task_args *args, void *state)
{
    return tl_shrink(o, args, state);
}

/* The run after the death: shrink, read back what it carried, and the survivors go on from
 * iteration at to the end (the reads come first: the steps write the windows after them),
 * every survivor's final p into arg 2. One run, so that the DFX outputs the example leaves
 * (the last run's) show the death, the shrink and the survivors' iterations together. */
static px_status tl_orch_shrink_go_on(px_orch *o, const px_task_args *args, void *state)
{
    tl_state *s = state;
    px_status st = tl_shrink(o, args, s);

    if (st == PX_OK)
        st = tl_steps(o, s, s->nd, s->at);
    if (st == PX_OK)
        st = tl_read_all(o, s, args, s->nd);
    if (st == PX_OK)
        st = px_domain_release(s->nd);
    s->nd = NULL;
    return st;
}

/* The reference (first run with a chip to kill): the survivors from scratch, from the host's
 * p and count at iteration at. */
static px_status tl_orch_ref(px_orch *o, const px_task_args *args, void *state)
{
    tl_state *s = state;
    px_domain *d;
    px_status st = tl_alloc(o, s, "train.ref", s->surv, s->nsurv, &d);

    if (st != PX_OK)
        return st;
    if ((st = tl_write_all(o, s, args, d)) == PX_OK && (st = tl_steps(o, s, d, s->at)) == PX_OK)
        st = tl_read_all(o, s, args, d);
    if (st == PX_OK)
        st = px_domain_release(d);
    return st;
}

/* px_run of fn with args (p: size floats, cnt: buffer it's three u64, out: n x size
 * floats). */
static px_status tl_run_with(px_worker *w, px_orch_fn fn, tl_state *s, float *p, int64_t *cnt,
                             float *out, px_example_result *r)
{
    int64_t pshape[1] = {s->size}, cshape[1] = {3}, oshape[2] = {s->n, s->size};
    px_tensor tp, tc, to;
    px_task_args args;

    px_tensor_make(&tp, p, PX_F32, 1, pshape);
    px_tensor_make(&tc, cnt, PX_I64, 1, cshape);
    px_tensor_make(&to, out, PX_F32, 2, oshape);
    px_args_init(&args);
    px_args_inout(&args, &tp);
    px_args_inout(&args, &tc);
    px_args_inout(&args, &to);
    return px_example_run_once(w, fn, &args, s, r);
}

static void tl_host(const tl_state *s, float *p, float *g, float *acc);

/*
 * With a chip to kill, before anything else: the host's parameters at iteration K into
 * s->snap, and the survivors from scratch from there (the reference, into s->ref). It runs
 * first so that the last run, whose DFX outputs stay, is the one after the death.
 */
static px_status tl_run_ref(px_worker *w, tl_state *s, px_example_result *r)
{
    size_t row = (size_t)s->size * sizeof(float);
    float *g = malloc(row), *acc = malloc(row);
    int64_t cnt[3] = {s->at, 0, 0};
    int iters = s->iters;
    px_status st = PX_OK;

    if (g == NULL || acc == NULL)
        st = px_set_error(PX_ENOMEM, "train_loop: cannot allocate the host's reference");
    if (st == PX_OK) {
        s->iters = s->at; /* iterations 0 .. at-1: every chip */
        tl_host(s, s->snap, g, acc);
        s->iters = iters;
        st = tl_run_with(w, tl_orch_ref, s, s->snap, cnt, s->ref, r);
    }
    free(g);
    free(acc);
    return st;
}

/*
 * --shrink kernel: run 2 (after the reference and the set-up) is the loop in one resilient
 * task (the survivors shrink in their kernels and finish); run 3 shrinks from the
 * orchestration to read every survivor's p, the count and rank 0's ks back.
 */
static px_status tl_run_kernel(px_worker *w, tl_state *s, px_example_result *r)
{
    int iters = s->iters, n = s->n;
    int64_t zero[3] = {0};
    char name[48];
    px_status st = tl_run_with(w, tl_orch_kloop, s, s->p0, zero, s->out, r);

    if (st == PX_OK)
        st = tl_run_with(w, tl_orch_shrink, s, s->carried, s->cnt, s->out, r);
    if (st == PX_OK && s->cnt[0] != (int64_t)iters)
        st = px_set_error(PX_ESTATE, "train_loop: the survivors' kernels counted %lld "
                          "iterations, expected %d", (long long)s->cnt[0], iters);
    if (st == PX_OK && s->cnt[2] != (int64_t)s->nsurv)
        st = px_set_error(PX_ESTATE, "train_loop: rank 0's kernel ended on a communicator of "
                          "%lld ranks; the orchestration's shrink found %d survivors",
                          (long long)s->cnt[2], s->nsurv);
    if (st == PX_OK && s->kill >= 0)
        printf("train_loop: %s died at iteration %d; the %d survivors shrank inside the "
               "loop's kernel (px_comm_shrink, %lld shrink%s) and went on\n",
               tl_kill_name(s, name, sizeof(name)), s->at, s->nsurv, (long long)s->cnt[1],
               s->cnt[1] == 1 ? "" : "s");
    snprintf(r->comm, sizeof(r->comm), "%.300s; %s, shrunk in the kernel, %d survivors "
             "finished %d iterations", s->info, s->kill >= 0 ? "a chip killed" : "no chip "
             "killed", s->kill >= 0 ? s->nsurv : n, iters);
    return st;
}

static px_status tl_run(px_worker *w, void *state, px_example_result *r)
{
    tl_state *s = state;
    size_t row = (size_t)s->size;
    int64_t zero[3] = {0};
    char name[48];
    px_status st;

    r->iters = s->iters;
    if ((st = tl_ranks(s, w)) != PX_OK)
        return st;
    tl_plan_survivors(s); /* every chip without a kill (--shrink kernel still shrinks) */
    s->p0 = malloc(row * sizeof(float));
    s->snap = malloc(row * sizeof(float));
    s->carried = malloc(row * sizeof(float));
    s->out = calloc((size_t)s->n * row, sizeof(float));
    s->ref = calloc((size_t)s->n * row, sizeof(float));
    if (s->p0 == NULL || s->snap == NULL || s->carried == NULL || s->out == NULL ||
        s->ref == NULL)
        return px_set_error(PX_ENOMEM, "train_loop: cannot allocate %lld floats of host data",
                            (long long)s->size);
    for (size_t i = 0; i < row; i++)
        s->p0[i] = (float)(i % 17) / 4.0f;
    if (s->kill >= 0 && (st = tl_run_ref(w, s, r)) != PX_OK)
        return st;
    if ((st = tl_run_with(w, tl_orch_setup, s, s->p0, zero, s->out, r)) != PX_OK)
        return st;
    if (s->in_kernel)
        return tl_run_kernel(w, s, r);
    st = tl_run_with(w, tl_orch_loop, s, s->p0, zero, s->out, r);
    if (s->kill < 0)
        return st;
    /* PX_EREVOKED: over hosts, the host of the chip killed may shrink (which revokes the
     * domain on every host) before this host's waits hear of the death */
    if (st != PX_EPEERDEAD && st != PX_EREVOKED)
        return st == PX_OK ? px_set_error(PX_ESTATE, "train_loop: %s was to die at "
                                          "iteration %d, but the loop finished",
                                          tl_kill_name(s, name, sizeof(name)), s->at) : st;
    printf("train_loop: iteration %d: %s\n", s->at, px_last_error());
    if ((st = tl_run_with(w, tl_orch_shrink_go_on, s, s->carried, s->cnt, s->out, r)) != PX_OK)
        return st;
    if (s->cnt[0] != (int64_t)s->at)
        return px_set_error(PX_ESTATE, "train_loop: the survivors carried iteration count %lld, "
                            "expected %d", (long long)s->cnt[0], s->at);
    if (memcmp(s->carried, s->snap, row * sizeof(float)) != 0)
        return px_set_error(PX_ESTATE, "train_loop: the parameters the shrink carried differ "
                            "from the host's at iteration %d", s->at);
    printf("train_loop: shrunk to %d survivors (generation %d); going on from iteration %d\n",
           s->nsurv, s->shrunk_gen, s->at);
    snprintf(r->comm, sizeof(r->comm), "%.300s; %s killed at iteration %d, %d survivors "
             "finished %d iterations", s->info, tl_kill_name(s, name, sizeof(name)), s->at,
             s->nsurv, s->iters - s->at);
    return st;
}

/* The host's computation: iterations 0 .. at-1 on every chip, the rest on the survivors
 * (every chip without a kill), each gradient sum folded in rank order. */
static void tl_host(const tl_state *s, float *p, float *g, float *acc)
{
    memcpy(p, s->p0, (size_t)s->size * sizeof(float));
    for (int k = 0; k < s->iters; k++) {
        int later = s->kill >= 0 && k >= s->at;
        int n = later ? s->nsurv : s->n;

        for (int r = 0; r < n; r++) {
            int c = later ? tl_shard(s, s->surv[r]) : r;

            for (int64_t i = 0; i < s->size; i++) {
                g[i] = p[i] - tl_target(c, i);
                acc[i] = r == 0 ? g[i] : acc[i] + g[i];
            }
        }
        tl_update(p, acc, s->size, n);
    }
}

static int tl_check(void *state, const px_example_result *r, char *why, size_t n)
{
    const tl_state *s = state;
    size_t row = (size_t)s->size * sizeof(float);
    int ranks = s->kill >= 0 ? s->nsurv : s->n, mine = 0;
    float *p = malloc(row), *g = malloc(row), *acc = malloc(row);
    char name[48], here[48] = "";
    int ok = 0;

    (void)r;
    if (p == NULL || g == NULL || acc == NULL || s->out == NULL) {
        snprintf(why, n, "train_loop: no result (the run did not finish, or out of memory)");
        goto out;
    }
    tl_host(s, p, g, acc);
    for (int k = 0; k < ranks; k++) { /* this host's ranks */
        if (!tl_local(s, s->kill >= 0 ? s->surv[k] : s->chips[k]))
            continue;
        mine++;
        if (memcmp(s->out + (size_t)k * (size_t)s->size, p, row) != 0) {
            snprintf(why, n, "train_loop: rank %d's final parameters differ from the host's "
                     "(same fold order)", k);
            goto out;
        }
        if (s->kill >= 0 && memcmp(s->ref + (size_t)k * (size_t)s->size, p, row) != 0) {
            snprintf(why, n, "train_loop: the survivors' run from scratch (from iteration %d) "
                     "differs at rank %d", s->at, k);
            goto out;
        }
    }
    if (mine == 0) {
        snprintf(why, n, "train_loop: host %d has no rank left to check", s->host);
        goto out;
    }
    if (s->hosts > 1) /* each host checks its own ranks */
        snprintf(here, sizeof(here), " (host %d checked its %d rank%s)", s->host, mine,
                 mine == 1 ? "" : "s");
    if (s->kill >= 0)
        snprintf(why, n, "%d iterations of %lld parameters: %s killed at iteration %d, "
                 "%d survivors%s bit-identical to a %d-chip run from iteration %d and to the "
                 "host%s", s->iters, (long long)s->size, tl_kill_name(s, name, sizeof(name)),
                 s->at, s->nsurv, s->in_kernel ? " (shrunk in the kernel)" : "", s->nsurv,
                 s->at, here);
    else
        snprintf(why, n, "%d iterations of %lld parameters on %d chips, bit-identical to the "
                 "host%s", s->iters, (long long)s->size, s->n, here);
    ok = 1;
out:
    free(p);
    free(g);
    free(acc);
    return ok;
}

const px_example px_example_train_loop = {
    .name = "train_loop",
    .doc = "level 3: data-parallel loop; --kill-chip N --at-iter K kills a chip, the "
           "survivors shrink the domain and finish",
    .level = 3,
    .default_size = 1024,
    .default_tile = 0,
    .size_doc = "parameters (floats) of the model",
    .reg = tl_reg,
    .orchestrate = tl_orch_loop,
    .run = tl_run,
    .check = tl_check,
    .fini = tl_fini,
};
