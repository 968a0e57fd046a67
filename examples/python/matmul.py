#!/usr/bin/env python3
"""matmul.py - C = A B with the built-in C matmul kernel, one task per block of rows of A
(contiguous views of the host arrays), checked against numpy (small integers: exact).
Usage: matmul.py [--size N] [--block R] [--cores N]"""
import argparse
import sys

import numpy as np

import plexus


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--size", type=int, default=256)
    ap.add_argument("--block", type=int, default=32)
    ap.add_argument("--cores", type=int, default=None)
    opt = ap.parse_args()
    n, bs = opt.size, opt.block
    if n % bs:
        print("FAIL: --size %d is not a multiple of --block %d" % (n, bs))
        return 2
    rng = np.random.default_rng(7)
    A = rng.integers(-4, 5, (n, n)).astype(np.float32)
    B = rng.integers(-4, 5, (n, n)).astype(np.float32)
    C = np.zeros((n, n), np.float32)
    with plexus.Worker(cores=opt.cores) as w:
        k = plexus.builtin(w)

        def orch(o):
            o.submit(k.scale, inputs=[B], outputs=[B], scalars=[1.0])  # B staged once
            for r in range(0, n, bs):
                o.submit(k.matmul, inputs=[A[r:r + bs], B], outputs=[C[r:r + bs]])

        r = w.run(orch)
    print("matmul: %dx%d blocks of %d rows: %d tasks in %.3f ms"
          % (n, n, bs, r.stats["tasks"], r.stats["wall_ns"] / 1e6))
    if not np.array_equal(C, A @ B):
        print("FAIL: C differs from numpy at %d places" % int((C != A @ B).sum()))
        return 1
    print("PASS")
    return 0


if __name__ == "__main__":
    sys.exit(main())
