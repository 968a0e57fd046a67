/*
 * chol_kernels.h - the BLAS tile kernels of the Cholesky example, shared by the C example
 * (examples/cholesky.c, registered with px_kernel_register) and the examples' kernel library
 * libplexus_examples_kernels.so (the same functions exported by name, which the Python
 * example loads with Worker.load_kernels).
 *
 * Every kernel works on 2-D tiles of a row-major matrix: shape {rows, cols}, stride {ld, 1}
 * with ld >= cols (a strided view of the whole matrix, or a contiguous tile). Kernels, for
 * the lower factor L of A = L L^T, one per dtype (f32, f64):
 *   chol_potrf_<t>(INOUT Akk, scalar k, scalar row0): Akk = its Cholesky factor (lower);
 *       k is the step and row0 the matrix row of the tile's first row, both only for the
 *       message of a tile that is not positive definite (the task fails naming both);
 *   chol_trsm_<t>(IN Lkk, INOUT Aik): Aik = Aik Lkk^-T;
 *   chol_syrk_<t>(IN Lik, INOUT Aii): Aii -= Lik Lik^T (lower triangle);
 *   chol_gemm_<t>(IN Lik, IN Ljk, INOUT Aij): Aij -= Lik Ljk^T.
 *
 * BLAS: CBLAS and LAPACKE from OpenBLAS, loaded with dlopen on first use (chol_blas_load):
 * neither libplexus nor the programs that link the examples (the `plexus` command, the tests)
 * carry a link to BLAS, so OpenBLAS and its thread pool exist only in a process that runs
 * these kernels. One BLAS thread per task: the kernels refuse to run (the task fails, saying
 * so) unless OpenBLAS reports one thread; chol_blas_one_thread sets it, process-wide.
 */
#ifndef PX_CHOL_KERNELS_H
#define PX_CHOL_KERNELS_H

#include <stddef.h>

#include <plexus/plexus.h>

/* The libraries chol_blas_load opens (Debian's libopenblas-dev and liblapacke-dev). */
#define CHOL_BLAS_LIB "libopenblas.so.0"
#define CHOL_LAPACKE_LIB "liblapacke.so.3"

/*
 * Loads CBLAS and LAPACKE once per process (later calls return the first result). Returns
 * PX_OK, or PX_ENOTSUP naming the library or symbol missing and the package to install.
 */
px_status chol_blas_load(void);

/*
 * Sets OpenBLAS to one thread for the whole process and returns the count it had in *before
 * (may be NULL), so the caller can restore it with chol_blas_set_threads. PX_ENOTSUP when
 * BLAS cannot be loaded.
 */
px_status chol_blas_one_thread(int *before);
void chol_blas_set_threads(int n);

/* OpenBLAS's thread count now; -1 when it is not loaded. */
int chol_blas_threads(void);

/* Path of the BLAS library the loader resolved (dladdr of cblas_dgemm), "" when not loaded. */
const char *chol_blas_path(void);

/*
 * The example's check: c (n x n, row-major, f64) -= l l^T on the lower triangle (DSYRK with
 * however many BLAS threads are set). PX_ENOTSUP when BLAS cannot be loaded.
 */
px_status chol_blas_syrk_sub(int n, const double *l, double *c);

/* The kernels and their signatures (exported from the kernel library under these names). */
#define CHOL_KERNEL(name)                                                                  \
    px_status name(px_core_ctx *ctx, const px_task_args *args);                            \
    extern const px_signature name##_sig;

CHOL_KERNEL(chol_potrf_f32)
CHOL_KERNEL(chol_potrf_f64)
CHOL_KERNEL(chol_trsm_f32)
CHOL_KERNEL(chol_trsm_f64)
CHOL_KERNEL(chol_syrk_f32)
CHOL_KERNEL(chol_syrk_f64)
CHOL_KERNEL(chol_gemm_f32)
CHOL_KERNEL(chol_gemm_f64)

#undef CHOL_KERNEL

#endif
