"""The tiled Cholesky of examples/python/cholesky.py as a scene test: BLAS kernels loaded by
name from the examples' kernel library, tiles as views of one numpy buffer, the factor checked
against numpy.linalg.cholesky, and the counts worked out by hand."""
import os
import sys

import numpy as np
import pytest

import plexus
from plexus.testing import SceneTest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                                "examples", "python"))
import cholesky as ex  # noqa: E402 - the example, from its folder

DTYPES = {"f32": np.float32, "f64": np.float64}


class TestCholeskyScene(SceneTest):
    # N in {1, 7, 50, 64}; NB dividing N and not; both dtypes
    cases = [{"n": 1, "nb": 1, "dtype": "f64"}, {"n": 7, "nb": 3, "dtype": "f32"},
             {"n": 50, "nb": 16, "dtype": "f64"}, {"n": 64, "nb": 16, "dtype": "f32"}]
    cores = 2
    rtol, atol = 1e-4, 1e-5  # f32 against numpy's f64 factor rounded to f32

    def generate_args(self, case, rng):
        a = ex.make_matrix(case["n"], DTYPES[case["dtype"]])
        self.tiles = ex.Tiles(case["n"], case["nb"], a.dtype)
        self.tiles.load(a)
        return {"tiles": self.tiles.buf}

    def compute_golden(self, case, args):
        # every lower tile of L; the diagonal tiles keep A's upper part (POTRF leaves it)
        a = ex.make_matrix(case["n"], np.float64)
        low = np.linalg.cholesky(a)
        want = ex.Tiles(case["n"], case["nb"], DTYPES[case["dtype"]])
        want.load(np.tril(low) + np.triu(a, 1))
        return {"tiles": want.buf}

    def register(self, w):
        self.lib = w.load_kernels(ex.default_kernels(), names=ex.KERNEL_NAMES)

    def callable(self, o, k, args, case):
        ex.orchestrate(o, self.lib, self.tiles, case["dtype"])

    def run_case(self, case, opts=None):
        with ex.OneBlasThread(ex.default_kernels()):
            r = super().run_case(case, opts)
        t = (case["n"] + case["nb"] - 1) // case["nb"]
        assert (r.stats["tasks"], r.stats["edges"]) == ex.counts(t)
        return r


def test_counts_by_hand():
    assert [ex.counts(t) for t in (1, 2, 3, 4, 5, 7)] == [
        (1, 0), (4, 3), (10, 12), (20, 30), (35, 60), (84, 168)]


@pytest.mark.parametrize("row,tile,step", [(0, 0, 0), (20, 1, 1), (49, 3, 3)])
def test_indefinite_fails_naming_the_tile_and_step(row, tile, step):
    a = ex.make_matrix(50, np.float64, indefinite=row)
    with plexus.Worker(cores=2) as w:
        with pytest.raises((plexus.KernelError, plexus.Aborted),
                           match=r"POTRF of diagonal tile \(%d,%d\) at step %d .*\(matrix row %d\)"
                           % (tile, tile, step, row)):
            ex.factor(w, ex.default_kernels(), a, 16)


def test_kernels_refuse_more_than_one_blas_thread():
    a = ex.make_matrix(20, np.float64)
    tiles = ex.Tiles(20, 8, np.float64)
    tiles.load(a)
    blas = ex.OneBlasThread(ex.default_kernels())
    with plexus.Worker(cores=1) as w:
        lib = w.load_kernels(ex.default_kernels(), names=ex.KERNEL_NAMES)
        before = blas.lib.chol_blas_threads()
        blas.lib.chol_blas_set_threads(2)
        if blas.lib.chol_blas_threads() != 2:
            blas.lib.chol_blas_set_threads(before)
            pytest.skip("OpenBLAS runs at most 1 thread here, so the refusal cannot show")
        try:
            with pytest.raises((plexus.Error,), match="OpenBLAS runs 2 threads"):
                w.run(lambda o: ex.orchestrate(o, lib, tiles, "f64"))
        finally:
            blas.lib.chol_blas_set_threads(before)
