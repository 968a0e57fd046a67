/*
 * cholesky.c - the tiled Cholesky example: A = L L^T of a symmetric positive definite N x N
 * matrix in f32 or f64, one task per tile operation, on BLAS kernels.
 *
 * The matrix (generated, deterministic): A(i,j) = A(j,i) = u(min(i,j), max(i,j)) off the
 * diagonal, u a hash of the pair scaled into [-0.5, 0.5), and A(i,i) = N. Every row's
 * off-diagonal entries sum in magnitude to at most (N - 1) / 2, so by Gershgorin every
 * eigenvalue lies in [(N + 1) / 2, (3N - 1) / 2]: A is positive definite and its condition
 * number is below 3. `--indefinite ROW` sets A(ROW,ROW) = -N instead: the leading minors up
 * to order ROW are untouched (still positive) and the one of order ROW + 1 is negative (its
 * Schur complement is at most -N), so the factorisation must stop exactly there: POTRF of
 * diagonal tile k = ROW / NB at step k fails, and the run FAILs naming that tile, the step and
 * the matrix row (never a PASS).
 *
 * Tiles of edge NB (--tile; the last row and column of tiles are smaller when NB does not
 * divide N), T = ceil(N / NB) per side; only the lower triangle of tiles is touched. The
 * right-looking algorithm, step k = 0 .. T-1:
 *   POTRF  A(k,k) = chol(A(k,k))                         INOUT A(k,k)
 *   TRSM   A(i,k) = A(i,k) L(k,k)^-T        i > k        IN A(k,k), INOUT A(i,k)
 *   SYRK   A(i,i) -= L(i,k) L(i,k)^T        i > k        IN A(i,k), INOUT A(i,i)
 *   GEMM   A(i,j) -= L(i,k) L(j,k)^T        i > j > k    IN A(i,k), IN A(j,k), INOUT A(i,j)
 * Each is one task whose dependencies plexus infers from these tags (no explicit edges). The
 * kernels (examples/kernels/chol_kernels.c) call CBLAS and LAPACKE from OpenBLAS, loaded when
 * the example registers them. One BLAS thread per task: registration sets OpenBLAS to one
 * thread (openblas_set_num_threads is process-wide; the count is restored at the end, and the
 * check runs with it), a level-3 chip starts with one BLAS thread (px_worker_init), and every
 * kernel refuses to run, failing its task, if OpenBLAS reports more than one.
 *
 * Level 2 (no --chips): the row-major N x N matrix is used in place (px_tensor_host; where the
 * device profile cannot map host pages it is px_run's one INOUT tensor, copied in and out,
 * and the run says so) and every tile is a strided view of it (stride {N, 1}). Level 3 (--chips K): the chips form a P x Q
 * grid (P the largest divisor of K not above sqrt(K)); tile (i,j) belongs to chip
 * (i mod P) * Q + (j mod Q), 2-D block-cyclic, and each task is a next-level task on the
 * owner of the tile it writes, running the callable "cholesky.tile" that submits the one
 * kernel there. At level 3 the matrix is stored tile by tile (each tile contiguous, tile-row
 * after tile-row): a chip's px_run copies in the whole byte span of every view it is given,
 * gaps between a strided tile's rows included, so a tile of a row-major matrix would cost N/NB
 * times its bytes; contiguous tiles span only their own. (px_run copies back only a written
 * view's own elements, so row-major tiles would be correct too: unit.test_copy_back. Before
 * that fix two chips writing tiles of the same rows overwrote each other's results.) The run
 * prints the bytes copied between the host heap and the chips (every
 * next-level task copies its IN and INOUT tiles in and its INOUT tile back: counted from the
 * tasks submitted, as plexus keeps no such counter) against the minimum the distribution
 * needs: each tile once to its owner, its final version once to every other chip that reads
 * it, and once back.
 *
 * Counts by hand. Tasks: T POTRF + T(T-1)/2 TRSM + T(T-1)/2 SYRK + T(T-1)(T-2)/6 GEMM.
 * Edges: a tile is read only after its last write (POTRF or TRSM), so there is no WAR edge;
 * every task has one RAW edge per IN tile (from the task that finalised it: each task writes
 * one tile, so these are distinct) and one edge from the previous writer of its INOUT tile,
 * which exists except at step 0:
 *   POTRF(k):     0 IN,  previous writer when k >= 1                 T - 1
 *   TRSM(i,k):    1 IN + previous writer when k >= 1    T(T-1)/2 + (T-1)(T-2)/2
 *   SYRK(i,k):    the same                              T(T-1)/2 + (T-1)(T-2)/2
 *   GEMM(i,j,k):  2 IN + previous writer when k >= 1    2 C(T,3) + C(T-1,3)
 * edges = (T-1)(2T-1) + 2 C(T,3) + C(T-1,3); T = 1: 1 task, 0 edges; T = 3: 10 tasks, 12
 * edges. The same at both levels.
 *
 * The check: the scaled residual ||A - L L^T||_F / (N ||A||_F eps), eps the dtype's machine
 * epsilon (2^-24, 2^-53), computed in f64 with BLAS (DSYRK) on the lower triangles, must be
 * below CH_RESID_BOUND = 16 (a backward-stable Cholesky gives a small multiple of 1; the
 * runs here print 0.01 to 0.2); the tile counts must match the ones above.
 */
#include "examples.h"
#include "kernels/chol_kernels.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CH_MAX_N 16384
#define CH_MAX_TASKS (1ll << 22)
#define CH_RESID_BOUND 16.0

enum { CH_POTRF, CH_TRSM, CH_SYRK, CH_GEMM, CH_OPS };

/* Kernel ids, [op][f64], set by ch_reg before px_worker_init: every chip inherits them. */
static px_kernel_id ch_k[CH_OPS][2];

typedef struct ch_state {
    px_callable_id tile_call; /* level 3: the chip's orchestration */
    int64_t n, nb, t;         /* matrix edge, tile edge, tiles per side */
    int f64;                  /* 1: f64, 0: f32 */
    size_t es;                /* element size */
    int chips, p, q;          /* level 3: chips in a P x Q grid; 0 at level 2 */
    int64_t indefinite;       /* the row made negative, -1 for none */
    int threads_before;       /* OpenBLAS's thread count before registration */
    void *a;                  /* the matrix: row-major (level 2) or tile by tile (level 3) */
    uint64_t bytes_copied;    /* level 3: host heap <-> chips, counted at submit */
    int in_place;             /* level 2: the run uses the host matrix in place */
    char why[PX_EXAMPLE_WHY_MAX];
} ch_state;

/* ---- the matrix ---- */

/* Rows (or columns) of tile index i. */
static int64_t ch_len(const ch_state *s, int64_t i)
{
    return s->n - i * s->nb < s->nb ? s->n - i * s->nb : s->nb;
}

/* Element (i, j) of A as the dtype holds it, in f64. */
static double ch_elem(const ch_state *s, int64_t i, int64_t j)
{
    double v;

    if (i == j) {
        v = i == s->indefinite ? -(double)s->n : (double)s->n;
    } else {
        uint64_t x = (uint64_t)(i < j ? i : j) * 0x9E3779B97F4A7C15ull ^
                     (uint64_t)(i < j ? j : i) * 0xD1B54A32D192ED03ull;

        x ^= x >> 31; /* a splitmix64 finaliser: decorrelates neighbouring pairs */
        x *= 0xBF58476D1CE4E5B9ull;
        x ^= x >> 27;
        x *= 0x94D049BB133111EBull;
        x ^= x >> 31;
        v = (double)(x >> 11) * 0x1.0p-53 - 0.5;
    }
    return s->f64 ? v : (double)(float)v;
}

/* Offset in elements of element (i, j) in the layout of the run (see the file comment). */
static int64_t ch_index(const ch_state *s, int64_t i, int64_t j)
{
    int64_t ti, tj, r0, c0;

    if (s->chips == 0)
        return i * s->n + j;
    ti = i / s->nb;
    tj = j / s->nb;
    r0 = ti * s->nb;
    c0 = tj * s->nb;
    return r0 * s->n + c0 * ch_len(s, ti) + (i - r0) * ch_len(s, tj) + (j - c0);
}

static void ch_store(ch_state *s, int64_t at, double v)
{
    if (s->f64)
        ((double *)s->a)[at] = v;
    else
        ((float *)s->a)[at] = (float)v;
}

static double ch_load(const ch_state *s, int64_t at)
{
    return s->f64 ? ((const double *)s->a)[at] : (double)((const float *)s->a)[at];
}

/* Fills the lower triangle of the matrix (the upper one is never read) in the run's layout. */
static void ch_fill(ch_state *s)
{
    for (int64_t i = 0; i < s->n; i++)
        for (int64_t j = 0; j <= i; j++)
            ch_store(s, ch_index(s, i, j), ch_elem(s, i, j));
}

/* ---- kernels and the chip's callable ---- */

/* The level-3 callable: args are the task's tiles and scalars, then the op. */
static px_status ch_tile_call(px_orch *o, const px_task_args *args, void *user)
{
    int n = px_arg_count(args), op = (int)px_arg_i64(args, n - 1), f64;
    static const int want[CH_OPS] = {4, 3, 3, 4};
    px_task_args a;

    if (op < 0 || op >= CH_OPS || n != want[op])
        return px_set_error(PX_EINVAL, "cholesky.tile: %d arguments with op %d; the "
                            "orchestration passes the tiles, the scalars and the op", n, op);
    f64 = px_arg_tensor(args, 0)->dtype == PX_F64;
    px_args_init(&a);
    if (op == CH_POTRF) {
        px_args_inout(&a, px_arg_tensor(args, 0));
        px_args_scalar_i64(&a, px_arg_i64(args, 1));
        px_args_scalar_i64(&a, px_arg_i64(args, 2));
    } else {
        for (int i = 0; i < n - 2; i++)
            px_args_in(&a, px_arg_tensor(args, i));
        px_args_inout(&a, px_arg_tensor(args, n - 2));
    }
    return px_submit(o, ch_k[op][f64], &a, NULL);
}

static px_status ch_register(px_worker *w, ch_state *s)
{
    static const struct {
        const char *name;
        px_kernel_fn fn;
        const px_signature *sig;
        int op, f64;
    } ks[] = {
        {"cholesky.potrf_f32", chol_potrf_f32, &chol_potrf_f32_sig, CH_POTRF, 0},
        {"cholesky.potrf_f64", chol_potrf_f64, &chol_potrf_f64_sig, CH_POTRF, 1},
        {"cholesky.trsm_f32", chol_trsm_f32, &chol_trsm_f32_sig, CH_TRSM, 0},
        {"cholesky.trsm_f64", chol_trsm_f64, &chol_trsm_f64_sig, CH_TRSM, 1},
        {"cholesky.syrk_f32", chol_syrk_f32, &chol_syrk_f32_sig, CH_SYRK, 0},
        {"cholesky.syrk_f64", chol_syrk_f64, &chol_syrk_f64_sig, CH_SYRK, 1},
        {"cholesky.gemm_f32", chol_gemm_f32, &chol_gemm_f32_sig, CH_GEMM, 0},
        {"cholesky.gemm_f64", chol_gemm_f64, &chol_gemm_f64_sig, CH_GEMM, 1},
    };
    px_status st = PX_OK;

    for (size_t i = 0; st == PX_OK && i < sizeof(ks) / sizeof(ks[0]); i++)
        st = px_kernel_register(w, ks[i].name, ks[i].fn, ks[i].sig, &ch_k[ks[i].op][ks[i].f64]);
    if (st == PX_OK && s->chips > 0)
        st = px_callable_register(w, "cholesky.tile", ch_tile_call, &s->tile_call);
    return st;
}

/* ---- setup ---- */

static px_status ch_validate(const px_example_opts *o, int *f64)
{
    int64_t t;

    if (o->size < 1 || o->size > CH_MAX_N)
        return px_set_error(PX_EINVAL, "cholesky: size %lld is out of range; use 1..%d (the "
                            "matrix edge N)", (long long)o->size, CH_MAX_N);
    if (o->tile < 1)
        return px_set_error(PX_EINVAL, "cholesky: tile %lld must be at least 1",
                            (long long)o->tile);
    if (o->iters != 1)
        return px_set_error(PX_EINVAL, "cholesky: iters %d: the factorisation runs once; drop "
                            "--iters", o->iters);
    if (o->indefinite > o->size)
        return px_set_error(PX_EINVAL, "cholesky: --indefinite %lld is not a row of the matrix; "
                            "use 0..%lld", (long long)o->indefinite - 1,
                            (long long)o->size - 1);
    t = (o->size + o->tile - 1) / o->tile;
    if (t * t * t / 6 + t * t > CH_MAX_TASKS)
        return px_set_error(PX_EINVAL, "cholesky: size %lld with tile %lld makes %lld tiles per "
                            "side, about %lld tasks, more than %lld; raise --tile",
                            (long long)o->size, (long long)o->tile, (long long)t,
                            (long long)(t * t * t / 6 + t * t), (long long)CH_MAX_TASKS);
    if (o->dtype == NULL || strcmp(o->dtype, "f64") == 0)
        *f64 = 1;
    else if (strcmp(o->dtype, "f32") == 0)
        *f64 = 0;
    else
        return px_set_error(PX_EINVAL, "cholesky: dtype \"%s\" is not supported; use f32 or f64",
                            o->dtype);
    return PX_OK;
}

static void ch_fini(void *state)
{
    ch_state *s = state;

    if (s == NULL)
        return;
    if (s->threads_before > 0)
        chol_blas_set_threads(s->threads_before);
    free(s->a);
    free(s);
}

/* The chips' P x Q grid: P the largest divisor of K with P * P <= K. */
static void ch_grid(ch_state *s, int k)
{
    s->chips = k;
    s->p = 1;
    for (int p = 1; p * p <= k; p++)
        if (k % p == 0)
            s->p = p;
    s->q = k / s->p;
}

static px_status ch_reg(px_worker *w, const px_example_opts *o, void **state)
{
    int f64 = 1;
    px_status st = ch_validate(o, &f64);
    ch_state *s;

    if (st == PX_OK)
        st = chol_blas_load();
    if (st != PX_OK)
        return st;
    s = calloc(1, sizeof(*s));
    if (s == NULL)
        return px_set_error(PX_ENOMEM, "cholesky: cannot allocate its state");
    s->n = o->size;
    s->nb = o->tile;
    s->t = (o->size + o->tile - 1) / o->tile;
    s->f64 = f64;
    s->es = f64 ? sizeof(double) : sizeof(float);
    s->indefinite = o->indefinite - 1;
    if (o->chips > 0)
        ch_grid(s, px_worker_chips(w));
    s->a = calloc((size_t)(s->n * s->n), s->es);
    if (s->a == NULL)
        st = px_set_error(PX_ENOMEM, "cholesky: cannot allocate %lld host bytes for N = %lld; "
                          "lower --size", (long long)(s->n * s->n * (int64_t)s->es),
                          (long long)s->n);
    if (st == PX_OK)
        st = chol_blas_one_thread(&s->threads_before);
    if (st == PX_OK)
        st = ch_register(w, s);
    if (st != PX_OK) {
        ch_fini(s);
        return st;
    }
    ch_fill(s);
    *state = s;
    return PX_OK;
}

/* Device memory: the matrix (the run area at level 2, the host heap at level 3). */
static void ch_memory(const px_example_opts *o, uint64_t *run, uint64_t *heap)
{
    uint64_t es = o->dtype != NULL && strcmp(o->dtype, "f32") == 0 ? 4 : 8;
    uint64_t n = o->size > 0 && o->size <= CH_MAX_N ? (uint64_t)o->size : 1;

    *run = n * n * es;
    *heap = 0;
}

/* ---- orchestration ---- */

/* The view of tile (i, j) of the run's matrix m. */
static px_status ch_tile(const ch_state *s, const px_tensor *m, int64_t i, int64_t j,
                         px_tensor *out)
{
    int64_t shape[2] = {ch_len(s, i), ch_len(s, j)};
    int64_t stride[2] = {s->chips == 0 ? s->n : shape[1], 1};

    return px_tensor_view(m, 2, shape, stride, ch_index(s, i * s->nb, j * s->nb), out);
}

/* The chip that owns tile (i, j). */
static int ch_owner(const ch_state *s, int64_t i, int64_t j)
{
    return (int)((i % s->p) * s->q + (j % s->q));
}

/*
 * Submits op on tiles (i,j), with (i,k) and (j,k) read as the op needs: POTRF (k,k); TRSM
 * reads (k,k) writes (i,k); SYRK reads (i,k) writes (i,i); GEMM reads (i,k), (j,k), writes
 * (i,j). At level 3 the task goes to the owner of the tile written.
 */
static px_status ch_submit(px_orch *o, ch_state *s, const px_tensor *m, int op, int64_t i,
                           int64_t j, int64_t k)
{
    px_tensor in[2], w;
    int nin = 0;
    px_task_args a;
    px_status st = PX_OK;
    int64_t wi = i, wj = j;

    if (op == CH_TRSM) {
        st = ch_tile(s, m, k, k, &in[nin++]);
        wj = k;
    } else if (op == CH_SYRK) {
        st = ch_tile(s, m, i, k, &in[nin++]);
    } else if (op == CH_GEMM) {
        st = ch_tile(s, m, i, k, &in[nin++]);
        if (st == PX_OK)
            st = ch_tile(s, m, j, k, &in[nin++]);
    }
    if (st == PX_OK)
        st = ch_tile(s, m, wi, wj, &w);
    if (st != PX_OK)
        return st;
    px_args_init(&a);
    for (int x = 0; x < nin; x++)
        px_args_in(&a, &in[x]);
    px_args_inout(&a, &w);
    if (op == CH_POTRF) {
        px_args_scalar_i64(&a, k);
        px_args_scalar_i64(&a, k * s->nb);
    }
    if (s->chips == 0)
        return px_submit(o, ch_k[op][s->f64], &a, NULL);
    for (int x = 0; x < nin; x++)
        s->bytes_copied += (uint64_t)px_tensor_numel(&in[x]) * s->es;
    s->bytes_copied += 2 * (uint64_t)px_tensor_numel(&w) * s->es;
    px_args_scalar_i64(&a, op);
    return px_submit_next_level(o, s->tile_call, &a, ch_owner(s, wi, wj), NULL);
}

/*
 * Right-looking: step k factors the diagonal tile, solves the column below, updates the rest.
 * The matrix is px_run's one argument, or at level 2 without arguments the host matrix
 * itself, used in place (px_tensor_host: no copy in or out).
 */
static px_status ch_orchestrate(px_orch *o, const px_task_args *args, void *state)
{
    ch_state *s = state;
    const px_tensor *m = px_arg_count(args) > 0 ? px_arg_tensor(args, 0) : NULL;
    int64_t shape[1] = {s->n * s->n};
    px_tensor host;
    px_status st = PX_OK;

    if (m == NULL) {
        st = px_tensor_host(o, s->a, s->f64 ? PX_F64 : PX_F32, 1, shape, &host);
        if (st != PX_OK)
            return st;
        m = &host;
    }

    for (int64_t k = 0; st == PX_OK && k < s->t; k++) {
        st = ch_submit(o, s, m, CH_POTRF, k, k, k);
        for (int64_t i = k + 1; st == PX_OK && i < s->t; i++)
            st = ch_submit(o, s, m, CH_TRSM, i, k, k);
        for (int64_t i = k + 1; st == PX_OK && i < s->t; i++) {
            st = ch_submit(o, s, m, CH_SYRK, i, i, k);
            for (int64_t j = k + 1; st == PX_OK && j < i; j++)
                st = ch_submit(o, s, m, CH_GEMM, i, j, k);
        }
    }
    return st;
}

/* The least bytes between the host heap and the chips (see the file comment). */
static uint64_t ch_min_bytes(const ch_state *s)
{
    uint64_t total = 0;
    uint64_t *seen = calloc((size_t)s->chips, sizeof(uint64_t)); /* reader mark per chip */
    uint64_t mark = 0;

    if (seen == NULL)
        return 0;
    for (int64_t i = 0; i < s->t; i++)
        for (int64_t k = 0; k <= i; k++) {
            uint64_t bytes = (uint64_t)(ch_len(s, i) * ch_len(s, k)) * s->es;
            int own = ch_owner(s, i, k), remote = 0;

            mark++;
#define CH_READER(r, c)                                                                    \
    do {                                                                                   \
        int who_ = ch_owner(s, (r), (c));                                                  \
        if (who_ != own && seen[who_] != mark) {                                           \
            seen[who_] = mark;                                                             \
            remote++;                                                                      \
        }                                                                                  \
    } while (0)
            if (i == k) { /* L(k,k): read by TRSM(r,k), which writes (r,k) */
                for (int64_t r = k + 1; r < s->t; r++)
                    CH_READER(r, k);
            } else { /* L(i,k): SYRK on (i,i), GEMM on (i,j) k<j<i and on (r,i) r>i */
                CH_READER(i, i);
                for (int64_t j = k + 1; j < i; j++)
                    CH_READER(i, j);
                for (int64_t r = i + 1; r < s->t; r++)
                    CH_READER(r, i);
            }
#undef CH_READER
            total += bytes * (uint64_t)(2 + remote);
        }
    free(seen);
    return total;
}

static px_status ch_run(px_worker *w, void *state, px_example_result *r)
{
    ch_state *s = state;
    int64_t shape[1] = {s->n * s->n};
    double gflops;
    px_tensor ta;
    px_task_args args;
    px_status st;
    size_t used;

    px_args_init(&args);
    s->in_place = s->chips == 0;
    if (s->in_place) { /* level 2: the host matrix in place where the device maps host pages */
        st = px_example_run_once(w, ch_orchestrate, &args, s, r);
        if (st != PX_ENOTSUP)
            goto ran;
        s->in_place = 0; /* refused before any task: copy it in and out instead */
    }
    st = px_tensor_make(&ta, s->a, s->f64 ? PX_F64 : PX_F32, 1, shape);
    if (st != PX_OK)
        return st;
    px_args_inout(&args, &ta);
    st = px_example_run_once(w, ch_orchestrate, &args, s, r);
ran:
    if (st != PX_OK)
        return st;
    gflops = r->seconds > 0 ? (double)s->n * (double)s->n * (double)s->n / 3.0 / r->seconds / 1e9
                            : 0.0;
    used = (size_t)snprintf(r->info, sizeof(r->info), "gflops %.2f (N^3/3 = %.4g flops)\n"
                            "blas %s, 1 thread per task; matrix %s", gflops,
                            (double)s->n * (double)s->n * (double)s->n / 3.0, chol_blas_path(),
                            s->in_place ? "used in place (px_tensor_host)"
                                        : "copied in and out by px_run");
    if (s->chips > 0 && used < sizeof(r->info)) {
        uint64_t min = ch_min_bytes(s);

        snprintf(r->info + used, sizeof(r->info) - used,
                 "\nlevel3 grid %dx%d (tile (i,j) on chip (i%%%d)*%d+(j%%%d))\n"
                 "bytes_copied %llu (host heap <-> chips), minimum %llu, factor %.2f",
                 s->p, s->q, s->p, s->q, s->q, (unsigned long long)s->bytes_copied,
                 (unsigned long long)min, min > 0 ? (double)s->bytes_copied / (double)min : 0.0);
    }
    return PX_OK;
}

/* ---- check ---- */

/* Frobenius norms of A and A - L L^T over the full symmetric matrices; -1 when out of memory. */
static int ch_residual(const ch_state *s, double *na, double *nr)
{
    size_t nn = (size_t)(s->n * s->n);
    double *l = calloc(nn, sizeof(double)), *c = calloc(nn, sizeof(double));
    double sa = 0, sr = 0;
    int ok = l != NULL && c != NULL;

    for (int64_t i = 0; ok && i < s->n; i++)
        for (int64_t j = 0; j <= i; j++) {
            l[i * s->n + j] = ch_load(s, ch_index(s, i, j));
            c[i * s->n + j] = ch_elem(s, i, j);
        }
    if (ok && chol_blas_syrk_sub((int)s->n, l, c) != PX_OK)
        ok = 0;
    for (int64_t i = 0; ok && i < s->n; i++)
        for (int64_t j = 0; j <= i; j++) {
            double a = ch_elem(s, i, j), d = c[i * s->n + j], f = i == j ? 1.0 : 2.0;

            sa += f * a * a;
            sr += f * d * d;
        }
    free(l);
    free(c);
    *na = sqrt(sa);
    *nr = sqrt(sr);
    return ok ? 0 : -1;
}

static int ch_check(void *state, const px_example_result *r, char *why, size_t n)
{
    ch_state *s = state;
    uint64_t t = (uint64_t)s->t;
    uint64_t c3 = t * (t - 1) * (t - 2) / 6, c3m = t < 2 ? 0 : (t - 1) * (t - 2) * (t - 3) / 6;
    uint64_t want_tasks = t + t * (t - 1) + c3, want_edges = (t - 1) * (2 * t - 1) + 2 * c3 + c3m;
    double eps = s->f64 ? 0x1.0p-53 : 0x1.0p-24, na, nr, scaled;

    if (s->threads_before > 0)
        chol_blas_set_threads(s->threads_before); /* the kernels have run: BLAS may use all */
    if (ch_residual(s, &na, &nr) != 0) {
        snprintf(why, n, "cannot compute the residual: %s",
                 px_last_error()[0] ? px_last_error() : "out of host memory for 2 N x N f64");
        return 0;
    }
    scaled = nr / ((double)s->n * na * eps);
    if (!(scaled < CH_RESID_BOUND)) { /* also catches NaN */
        snprintf(why, n, "scaled residual ||A - L L^T||_F / (N ||A||_F eps) = %.4g is not below "
                 "%g (N = %lld, tile %lld, %s)", scaled, CH_RESID_BOUND, (long long)s->n,
                 (long long)s->nb, s->f64 ? "f64" : "f32");
        return 0;
    }
    if (s->indefinite >= 0) {
        snprintf(why, n, "the matrix was made indefinite at row %lld but the factorisation "
                 "succeeded", (long long)s->indefinite);
        return 0;
    }
    if (r->tasks != want_tasks || r->edges != want_edges) {
        snprintf(why, n, "counts differ: tasks %llu, edges %llu; with T = %llu tiles per side "
                 "expected %llu tasks (T + T(T-1) + C(T,3)) and %llu edges ((T-1)(2T-1) + "
                 "2 C(T,3) + C(T-1,3))", (unsigned long long)r->tasks,
                 (unsigned long long)r->edges, (unsigned long long)t,
                 (unsigned long long)want_tasks, (unsigned long long)want_edges);
        return 0;
    }
    snprintf(why, n, "L L^T = A for N = %lld, tile %lld, %s: scaled residual %.3g < %g; tasks "
             "%llu, edges %llu as worked out for T = %llu", (long long)s->n, (long long)s->nb,
             s->f64 ? "f64" : "f32", scaled, CH_RESID_BOUND, (unsigned long long)r->tasks,
             (unsigned long long)r->edges, (unsigned long long)t);
    return 1;
}

const px_example px_example_cholesky = {
    .name = "cholesky",
    .doc = "tiled A = L L^T (f32/f64) on BLAS kernels: POTRF/TRSM/SYRK/GEMM tasks on tile "
           "views; --chips K: level 3, tiles 2-D block-cyclic",
    .level = 2,
    .chips_opt = 1,
    .default_size = 1024,
    .default_tile = 256,
    .size_doc = "matrix edge N (any N; need not be a multiple of --tile)",
    .dtypes = "f32, f64 (default)",
    .memory = ch_memory,
    .reg = ch_reg,
    .orchestrate = ch_orchestrate,
    .run = ch_run,
    .check = ch_check,
    .fini = ch_fini,
};
