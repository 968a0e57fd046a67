#!/usr/bin/env python3
"""cholesky.py - the tiled Cholesky A = L L^T from Python on numpy tiles, with the BLAS
kernels of the examples' kernel library (libplexus_examples_kernels.so, loaded by name with
Worker.load_kernels: the Python package itself has no BLAS), checked against
numpy.linalg.cholesky and by the scaled residual ||A - L L^T||_F / (N ||A||_F eps) < 16.

The matrix is examples/cholesky.c's kind: symmetric, off-diagonal entries in [-0.5, 0.5), N on
the diagonal, so positive definite with a condition number below 3; --indefinite ROW makes
A[ROW, ROW] = -N, and the run must fail naming the tile and the step. The lower tiles live in
one numpy buffer, tile after tile (each tile a contiguous 2-D view of it: plexus uses the
buffer in place, one registration); one task per tile operation (POTRF, TRSM, SYRK, GEMM),
dependencies inferred from the tiles each task reads and writes. OpenBLAS runs one thread
per task: the kernel library's chol_blas_one_thread() sets it for the run (the kernels refuse
to run otherwise), and the count is restored for numpy afterwards.
Usage: cholesky.py [--size N] [--tile NB] [--dtype f32|f64] [--cores N] [--indefinite ROW]
                   [--kernels PATH]"""
import argparse
import ctypes
import os
import sys
import time

import numpy as np

import plexus

KERNEL_NAMES = ["chol_%s_%s" % (op, t) for op in ("potrf", "trsm", "syrk", "gemm")
                for t in ("f32", "f64")]
RESIDUAL_BOUND = 16.0


def default_kernels() -> str:
    """The kernel library of the build the plexus package comes from (build/lib)."""
    build = os.environ.get("PX_BUILD_DIR")
    if build:
        return os.path.join(build, "lib", "libplexus_examples_kernels.so")
    here = os.path.dirname(os.path.abspath(plexus.__file__))
    return os.path.normpath(os.path.join(here, "..", "..", "lib",
                                         "libplexus_examples_kernels.so"))


def make_matrix(n: int, dtype, indefinite: int = -1) -> np.ndarray:
    """The symmetric test matrix (see the module's doc), as dtype."""
    rng = np.random.default_rng(36)
    u = rng.random((n, n)) - 0.5
    a = np.tril(u, -1)
    a = a + a.T + n * np.eye(n)
    if indefinite >= 0:
        a[indefinite, indefinite] = -n
    return a.astype(dtype)


class Tiles:
    """The lower tiles of an n x n matrix, tile edge nb (the last ones smaller), stored one
    after another in one contiguous buffer; tile(i, j) is a contiguous 2-D view of it."""

    def __init__(self, n: int, nb: int, dtype):
        self.n, self.nb, self.t = n, nb, (n + nb - 1) // nb
        self.offsets = {}
        size = 0
        for i in range(self.t):
            for j in range(i + 1):
                self.offsets[i, j] = size
                size += self.rows(i) * self.rows(j)
        self.buf = np.zeros(size, dtype)

    def rows(self, i: int) -> int:
        """Rows (or columns) of tile index i."""
        return min(self.nb, self.n - i * self.nb)

    def tile(self, i: int, j: int) -> np.ndarray:
        """Tile (i, j), i >= j: a view of the buffer."""
        off = self.offsets[i, j]
        r, c = self.rows(i), self.rows(j)
        return self.buf[off:off + r * c].reshape(r, c)

    def load(self, a: np.ndarray) -> None:
        """Copies the lower tiles of a in."""
        for (i, j) in self.offsets:
            r0, c0 = i * self.nb, j * self.nb
            self.tile(i, j)[:] = a[r0:r0 + self.rows(i), c0:c0 + self.rows(j)]

    def lower(self) -> np.ndarray:
        """The lower triangle the tiles hold, as an n x n f64 matrix."""
        out = np.zeros((self.n, self.n))
        for (i, j) in self.offsets:
            r0, c0 = i * self.nb, j * self.nb
            out[r0:r0 + self.rows(i), c0:c0 + self.rows(j)] = self.tile(i, j)
        return np.tril(out)


def counts(t: int):
    """Tasks and edges worked out by hand (examples/cholesky.c) for t tiles per side."""
    c3 = t * (t - 1) * (t - 2) // 6
    c3m = (t - 1) * (t - 2) * (t - 3) // 6 if t >= 3 else 0
    return t + t * (t - 1) + c3, (t - 1) * (2 * t - 1) + 2 * c3 + c3m


def orchestrate(o, lib, tiles: Tiles, sfx: str) -> None:
    """Right-looking: step k factors tile (k,k), solves the column below, updates the rest."""
    potrf, trsm = lib["chol_potrf_" + sfx], lib["chol_trsm_" + sfx]
    syrk, gemm = lib["chol_syrk_" + sfx], lib["chol_gemm_" + sfx]
    tl = tiles.tile
    for k in range(tiles.t):
        o.submit(potrf, inouts=[tl(k, k)], scalars=[k, k * tiles.nb])
        for i in range(k + 1, tiles.t):
            o.submit(trsm, inputs=[tl(k, k)], inouts=[tl(i, k)])
        for i in range(k + 1, tiles.t):
            o.submit(syrk, inputs=[tl(i, k)], inouts=[tl(i, i)])
            for j in range(k + 1, i):
                o.submit(gemm, inputs=[tl(i, k), tl(j, k)], inouts=[tl(i, j)])


class OneBlasThread:
    """OpenBLAS at one thread (process-wide) inside the with block, through the kernel
    library's chol_blas_one_thread(); the count before is restored on exit."""

    def __init__(self, path: str):
        self.lib = ctypes.CDLL(path)
        self.before = ctypes.c_int(0)

    def __enter__(self):
        if self.lib.chol_blas_one_thread(ctypes.byref(self.before)) != 0:
            raise plexus.NotSupported("cannot load OpenBLAS and LAPACKE for the kernels "
                                      "(make deps: libopenblas-dev, liblapacke-dev)")
        return self

    def __exit__(self, *exc):
        self.lib.chol_blas_set_threads(self.before)
        return False


def factor(w, path: str, a: np.ndarray, nb: int):
    """Factors a on worker w with the kernels of library path; returns (tiles, run result)."""
    sfx = "f64" if a.dtype == np.float64 else "f32"
    tiles = Tiles(a.shape[0], nb, a.dtype)
    tiles.load(a)
    lib = w.load_kernels(path, names=KERNEL_NAMES)
    with OneBlasThread(path):
        r = w.run(lambda o: orchestrate(o, lib, tiles, sfx))
    return tiles, r


def scaled_residual(a: np.ndarray, low: np.ndarray) -> float:
    """||A - L L^T||_F / (N ||A||_F eps), eps of a's dtype, computed in f64."""
    a64 = a.astype(np.float64)
    eps = np.finfo(a.dtype).eps / 2  # the unit roundoff, as the C example's 2^-24 / 2^-53
    return float(np.linalg.norm(a64 - low @ low.T) / (a.shape[0] * np.linalg.norm(a64) * eps))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--size", type=int, default=300)
    ap.add_argument("--tile", type=int, default=64)
    ap.add_argument("--dtype", choices=["f32", "f64"], default="f64")
    ap.add_argument("--cores", type=int, default=None)
    ap.add_argument("--indefinite", type=int, default=-1, metavar="ROW")
    ap.add_argument("--kernels", default=default_kernels())
    opt = ap.parse_args()
    n, nb = opt.size, opt.tile
    if n < 1 or nb < 1 or opt.indefinite >= n:
        print("FAIL: --size and --tile must be at least 1 and --indefinite below --size")
        return 2
    a = make_matrix(n, np.float64 if opt.dtype == "f64" else np.float32, opt.indefinite)
    with plexus.Worker(cores=opt.cores) as w:
        t0 = time.perf_counter()
        try:
            tiles, r = factor(w, opt.kernels, a, nb)
        except (plexus.KernelError, plexus.Aborted) as e:
            # the failed POTRF's message names the tile, the step and the row; a submit after
            # it sees the run aborted, with that message
            print("FAIL: %s" % e)
            return 1
        wall = time.perf_counter() - t0
    want_tasks, want_edges = counts(tiles.t)
    sec = r.stats["wall_ns"] / 1e9
    print("cholesky: N %d, tile %d, %s: tasks %d, edges %d, %.3f ms (%.2f GFLOP/s, N^3/3), "
          "%.3f s with Python's setup" % (n, nb, opt.dtype, r.stats["tasks"], r.stats["edges"],
                                          sec * 1e3, n ** 3 / 3 / sec / 1e9, wall))
    if opt.indefinite >= 0:
        print("FAIL: the matrix was made indefinite at row %d but the run succeeded"
              % opt.indefinite)
        return 1
    if (r.stats["tasks"], r.stats["edges"]) != (want_tasks, want_edges):
        print("FAIL: tasks %d, edges %d; worked out %d and %d for T = %d"
              % (r.stats["tasks"], r.stats["edges"], want_tasks, want_edges, tiles.t))
        return 1
    low = tiles.lower()
    res = scaled_residual(a, low)
    ref = np.linalg.cholesky(a.astype(np.float64))
    diff = float(np.abs(low - ref).max() / np.abs(ref).max())
    tol = 1e-4 if opt.dtype == "f32" else 1e-12
    print("scaled residual %.3g (bound %g); max |L - numpy's L| / max |L| = %.3g (bound %g)"
          % (res, RESIDUAL_BOUND, diff, tol))
    if not res < RESIDUAL_BOUND or not diff < tol:
        print("FAIL: L differs from numpy.linalg.cholesky or does not reproduce A")
        return 1
    print("PASS")
    return 0


if __name__ == "__main__":
    sys.exit(main())
