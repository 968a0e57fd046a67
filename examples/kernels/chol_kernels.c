/*
 * chol_kernels.c - the Cholesky example's BLAS tile kernels (see chol_kernels.h).
 *
 * Layout: a tile is row-major with leading dimension ld (stride[0]). Read as column-major,
 * the same bytes are the tile's transpose, so the row-major lower factor L of a symmetric
 * tile is the column-major upper factor U = L^T of the same bytes: POTRF runs LAPACKE's
 * column-major 'U' on them (the row-major LAPACKE entry would copy the tile to transpose it).
 * TRSM, SYRK and GEMM use CBLAS's row-major entries, which OpenBLAS maps onto its
 * column-major kernels without copying.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* dladdr */
#endif
#include "chol_kernels.h"

#include <cblas.h>
#include <dlfcn.h>
#include <lapacke.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#define CHOL_API __attribute__((visibility("default")))

/* The entry points, resolved by chol_blas_load. */
static struct {
    __typeof__(cblas_strsm) *strsm;
    __typeof__(cblas_dtrsm) *dtrsm;
    __typeof__(cblas_ssyrk) *ssyrk;
    __typeof__(cblas_dsyrk) *dsyrk;
    __typeof__(cblas_sgemm) *sgemm;
    __typeof__(cblas_dgemm) *dgemm;
    __typeof__(LAPACKE_spotrf_work) *spotrf;
    __typeof__(LAPACKE_dpotrf_work) *dpotrf;
    __typeof__(openblas_set_num_threads) *set_threads;
    __typeof__(openblas_get_num_threads) *get_threads;
} chol_blas;

static pthread_once_t chol_blas_once = PTHREAD_ONCE_INIT;
static px_status chol_blas_status = PX_ENOTSUP;
static char chol_blas_why[512] = "not loaded";
static char chol_blas_file[256];

/* dlsym of name in h into *slot; returns 0, or -1 with the reason in chol_blas_why. */
static int chol_sym(void *h, const char *lib, const char *name, void **slot)
{
    *slot = dlsym(h, name);
    if (*slot != NULL)
        return 0;
    snprintf(chol_blas_why, sizeof(chol_blas_why),
             "%s has no symbol %s; install OpenBLAS and LAPACKE (`make deps`: libopenblas-dev, "
             "liblapacke-dev)", lib, name);
    return -1;
}

/* Opens lib; returns its handle, or NULL with the reason in chol_blas_why. */
static void *chol_open(const char *lib)
{
    void *h = dlopen(lib, RTLD_NOW | RTLD_LOCAL);

    if (h == NULL)
        snprintf(chol_blas_why, sizeof(chol_blas_why),
                 "cannot load %s (%s); install OpenBLAS and LAPACKE (`make deps`: "
                 "libopenblas-dev, liblapacke-dev)", lib, dlerror());
    return h;
}

static void chol_blas_do_load(void)
{
    void *b = chol_open(CHOL_BLAS_LIB), *l = b != NULL ? chol_open(CHOL_LAPACKE_LIB) : NULL;
    Dl_info info;

    if (b == NULL || l == NULL)
        return;
    if (chol_sym(b, CHOL_BLAS_LIB, "cblas_strsm", (void **)&chol_blas.strsm) ||
        chol_sym(b, CHOL_BLAS_LIB, "cblas_dtrsm", (void **)&chol_blas.dtrsm) ||
        chol_sym(b, CHOL_BLAS_LIB, "cblas_ssyrk", (void **)&chol_blas.ssyrk) ||
        chol_sym(b, CHOL_BLAS_LIB, "cblas_dsyrk", (void **)&chol_blas.dsyrk) ||
        chol_sym(b, CHOL_BLAS_LIB, "cblas_sgemm", (void **)&chol_blas.sgemm) ||
        chol_sym(b, CHOL_BLAS_LIB, "cblas_dgemm", (void **)&chol_blas.dgemm) ||
        chol_sym(b, CHOL_BLAS_LIB, "openblas_set_num_threads",
                 (void **)&chol_blas.set_threads) ||
        chol_sym(b, CHOL_BLAS_LIB, "openblas_get_num_threads",
                 (void **)&chol_blas.get_threads) ||
        chol_sym(l, CHOL_LAPACKE_LIB, "LAPACKE_spotrf_work", (void **)&chol_blas.spotrf) ||
        chol_sym(l, CHOL_LAPACKE_LIB, "LAPACKE_dpotrf_work", (void **)&chol_blas.dpotrf))
        return;
    if (dladdr((void *)chol_blas.dgemm, &info) != 0 && info.dli_fname != NULL)
        snprintf(chol_blas_file, sizeof(chol_blas_file), "%s", info.dli_fname);
    chol_blas_status = PX_OK;
}

CHOL_API px_status chol_blas_load(void)
{
    pthread_once(&chol_blas_once, chol_blas_do_load);
    if (chol_blas_status != PX_OK)
        return px_set_error(chol_blas_status, "cholesky kernels: %s", chol_blas_why);
    return PX_OK;
}

CHOL_API px_status chol_blas_one_thread(int *before)
{
    px_status st = chol_blas_load();

    if (st != PX_OK)
        return st;
    if (before != NULL)
        *before = chol_blas.get_threads();
    chol_blas.set_threads(1);
    return PX_OK;
}

CHOL_API void chol_blas_set_threads(int n)
{
    if (chol_blas_load() == PX_OK && n > 0)
        chol_blas.set_threads(n);
}

CHOL_API int chol_blas_threads(void)
{
    return chol_blas_load() == PX_OK ? chol_blas.get_threads() : -1;
}

CHOL_API const char *chol_blas_path(void)
{
    return chol_blas_load() == PX_OK ? chol_blas_file : "";
}

/* ---- argument checks ---- */

/* A tile: its first element, rows, columns and leading dimension. */
typedef struct chol_tile {
    void *p;
    int rows, cols, ld;
} chol_tile;

/* Reads tensor argument i as a tile; PX_EINVAL naming kernel k when it is not one. */
static px_status chol_tile_get(const px_task_args *a, int i, const char *k, chol_tile *t)
{
    const px_tensor *x = px_arg_tensor(a, i);

    if (x == NULL || x->ndim != 2 || x->stride[1] != 1 || x->shape[1] > x->stride[0] ||
        x->shape[0] > (1 << 30) || x->stride[0] > (1 << 30))
        return px_set_error(PX_EINVAL, "kernel %s: argument %d is not a row-major 2-D tile "
                            "(pass shape {rows, cols} with strides {ld, 1}, ld >= cols)", k, i);
    t->p = px_tensor_data(x);
    t->rows = (int)x->shape[0];
    t->cols = (int)x->shape[1];
    t->ld = (int)x->stride[0];
    return PX_OK;
}

/* Refuses to run with more than one BLAS thread: see chol_kernels.h. */
static px_status chol_ready(const char *k)
{
    px_status st = chol_blas_load();
    int n;

    if (st != PX_OK)
        return st;
    n = chol_blas.get_threads();
    if (n != 1)
        return px_set_error(PX_ESTATE, "kernel %s: OpenBLAS runs %d threads; a tile kernel "
                            "must run on its own core only: call chol_blas_one_thread() "
                            "(openblas_set_num_threads(1)) before the run", k, n);
    return PX_OK;
}

/* Refuses tiles whose shapes do not fit together, naming kernel k. */
static px_status chol_shape_error(const char *k, const chol_tile *x, const chol_tile *y,
                                  const chol_tile *z)
{
    return px_set_error(PX_EINVAL, "kernel %s: tile shapes do not fit (%dx%d, %dx%d, %dx%d); "
                        "see examples/kernels/chol_kernels.h for each kernel's shapes", k,
                        x->rows, x->cols, y->rows, y->cols, z ? z->rows : 0, z ? z->cols : 0);
}

/* ---- POTRF ---- */

static px_status chol_potrf(const px_task_args *a, int f64, const char *k)
{
    chol_tile t = {0};
    px_status st = chol_ready(k);
    lapack_int info;

    if (st == PX_OK)
        st = chol_tile_get(a, 0, k, &t);
    if (st != PX_OK)
        return st;
    if (t.rows != t.cols)
        return chol_shape_error(k, &t, &t, NULL);
    /* Column-major 'U' on the row-major lower tile: the file comment says why. */
    info = f64 ? chol_blas.dpotrf(LAPACK_COL_MAJOR, 'U', t.rows, t.p, t.ld)
               : chol_blas.spotrf(LAPACK_COL_MAJOR, 'U', t.rows, t.p, t.ld);
    if (info > 0) {
        int64_t step = px_arg_i64(a, 1), row0 = px_arg_i64(a, 2);

        return px_set_error(PX_EKERNEL, "cholesky: the matrix is not positive definite: POTRF "
                            "of diagonal tile (%lld,%lld) at step %lld found its leading minor "
                            "of order %d not positive (matrix row %lld)",
                            (long long)step, (long long)step, (long long)step, (int)info,
                            (long long)(row0 + info - 1));
    }
    if (info < 0)
        return px_set_error(PX_EKERNEL, "kernel %s: LAPACKE potrf refused argument %d", k,
                            (int)-info);
    return PX_OK;
}

/* ---- TRSM: B = B L^-T ---- */

static px_status chol_trsm(const px_task_args *a, int f64, const char *k)
{
    chol_tile l = {0}, b = {0};
    px_status st = chol_ready(k);

    if (st == PX_OK)
        st = chol_tile_get(a, 0, k, &l);
    if (st == PX_OK)
        st = chol_tile_get(a, 1, k, &b);
    if (st != PX_OK)
        return st;
    if (l.rows != l.cols || b.cols != l.rows)
        return chol_shape_error(k, &l, &b, NULL);
    if (f64)
        chol_blas.dtrsm(CblasRowMajor, CblasRight, CblasLower, CblasTrans, CblasNonUnit, b.rows,
                        b.cols, 1.0, l.p, l.ld, b.p, b.ld);
    else
        chol_blas.strsm(CblasRowMajor, CblasRight, CblasLower, CblasTrans, CblasNonUnit, b.rows,
                        b.cols, 1.0f, l.p, l.ld, b.p, b.ld);
    return PX_OK;
}

/* ---- SYRK: C -= A A^T, lower triangle ---- */

static px_status chol_syrk(const px_task_args *a, int f64, const char *k)
{
    chol_tile x = {0}, c = {0};
    px_status st = chol_ready(k);

    if (st == PX_OK)
        st = chol_tile_get(a, 0, k, &x);
    if (st == PX_OK)
        st = chol_tile_get(a, 1, k, &c);
    if (st != PX_OK)
        return st;
    if (c.rows != c.cols || x.rows != c.rows)
        return chol_shape_error(k, &x, &c, NULL);
    if (f64)
        chol_blas.dsyrk(CblasRowMajor, CblasLower, CblasNoTrans, c.rows, x.cols, -1.0, x.p,
                        x.ld, 1.0, c.p, c.ld);
    else
        chol_blas.ssyrk(CblasRowMajor, CblasLower, CblasNoTrans, c.rows, x.cols, -1.0f, x.p,
                        x.ld, 1.0f, c.p, c.ld);
    return PX_OK;
}

/* ---- GEMM: C -= A B^T ---- */

static px_status chol_gemm(const px_task_args *a, int f64, const char *k)
{
    chol_tile x = {0}, y = {0}, c = {0};
    px_status st = chol_ready(k);

    if (st == PX_OK)
        st = chol_tile_get(a, 0, k, &x);
    if (st == PX_OK)
        st = chol_tile_get(a, 1, k, &y);
    if (st == PX_OK)
        st = chol_tile_get(a, 2, k, &c);
    if (st != PX_OK)
        return st;
    if (x.rows != c.rows || y.rows != c.cols || x.cols != y.cols)
        return chol_shape_error(k, &x, &y, &c);
    if (f64)
        chol_blas.dgemm(CblasRowMajor, CblasNoTrans, CblasTrans, c.rows, c.cols, x.cols, -1.0,
                        x.p, x.ld, y.p, y.ld, 1.0, c.p, c.ld);
    else
        chol_blas.sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, c.rows, c.cols, x.cols, -1.0f,
                        x.p, x.ld, y.p, y.ld, 1.0f, c.p, c.ld);
    return PX_OK;
}

/* ---- the exported kernels and signatures ---- */

#define CHOL_SIG3(name, t)                                                                 \
    CHOL_API const px_signature name##_sig = {                                             \
        .nargs = 3, .params = {{PX_TAG_IN, t}, {PX_TAG_IN, t}, {PX_TAG_INOUT, t}}};
#define CHOL_SIG2(name, t)                                                                 \
    CHOL_API const px_signature name##_sig = {                                             \
        .nargs = 2, .params = {{PX_TAG_IN, t}, {PX_TAG_INOUT, t}}};
#define CHOL_SIGP(name, t)                                                                 \
    CHOL_API const px_signature name##_sig = {                                             \
        .nargs = 3,                                                                        \
        .params = {{PX_TAG_INOUT, t}, {PX_TAG_SCALAR, PX_DTYPE_ANY},                       \
                   {PX_TAG_SCALAR, PX_DTYPE_ANY}}};

#define CHOL_DEF(op, sfx, f64, sig)                                                        \
    sig(chol_##op##_##sfx, f64 ? PX_F64 : PX_F32)                                          \
    CHOL_API px_status chol_##op##_##sfx(px_core_ctx *ctx, const px_task_args *args)       \
    {                                                                                      \
        (void)ctx;                                                                         \
        return chol_##op(args, f64, "chol_" #op "_" #sfx);                                 \
    }

CHOL_DEF(potrf, f32, 0, CHOL_SIGP)
CHOL_DEF(potrf, f64, 1, CHOL_SIGP)
CHOL_DEF(trsm, f32, 0, CHOL_SIG2)
CHOL_DEF(trsm, f64, 1, CHOL_SIG2)
CHOL_DEF(syrk, f32, 0, CHOL_SIG2)
CHOL_DEF(syrk, f64, 1, CHOL_SIG2)
CHOL_DEF(gemm, f32, 0, CHOL_SIG3)
CHOL_DEF(gemm, f64, 1, CHOL_SIG3)

/* ---- the example's check ---- */

CHOL_API px_status chol_blas_syrk_sub(int n, const double *l, double *c)
{
    px_status st = chol_blas_load();

    if (st != PX_OK)
        return st;
    chol_blas.dsyrk(CblasRowMajor, CblasLower, CblasNoTrans, n, n, -1.0, l, n, 1.0, c, n);
    return PX_OK;
}
