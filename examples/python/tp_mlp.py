#!/usr/bin/env python3
"""tp_mlp.py - a tensor-parallel MLP over the chips of a level-3 worker: rank r holds column
slice r of W1 and row slice r of W2, computes relu(X W1_r) W2_r in a Python kernel and the
ranks allreduce the partial Y in place in the domain's window. Checked against the numpy
golden relu(X W1) W2 (small integers: exact).
Usage: tp_mlp.py [--chips N] [--rows M] [--profile P]"""
import argparse
import sys

import numpy as np

import plexus

K, F, N = 16, 8, 12  # X[M,K], W1[K,F*chips], W2[F*chips,N]


@plexus.kernel(comm=True)
def tp_rank(m, comm):
    x = comm.buffer("x", np.float32, (m, K))
    w1 = comm.buffer("w1", np.float32, (K, F))
    w2 = comm.buffer("w2", np.float32, (F, N))
    y = comm.buffer("y", np.float32, (m, N))
    y[:] = np.maximum(x @ w1, 0) @ w2
    comm.allreduce(y)


@plexus.callable
def tp_callable(o, m, dom):
    o.submit(tp_rank, scalars=[m], domain=dom)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--chips", type=int, default=2)
    ap.add_argument("--rows", type=int, default=8)
    ap.add_argument("--profile", default=None)
    opt = ap.parse_args()
    n, m = opt.chips, opt.rows
    rng = np.random.default_rng(3)
    X = rng.integers(-2, 3, (m, K)).astype(np.float32)
    W1 = rng.integers(-2, 3, (K, F * n)).astype(np.float32)
    W2 = rng.integers(-2, 3, (F * n, N)).astype(np.float32)
    Y = np.zeros((n, m, N), np.float32)
    golden = np.maximum(X @ W1, 0) @ W2
    info = {}
    with plexus.Worker(level=3, chips=n, cores=1, profile=opt.profile) as w:
        w.register(tp_rank, tp_callable)

        def orch(o):
            bufs = {"x": X.nbytes, "w1": K * F * 4, "w2": F * N * 4, "y": m * N * 4}
            with o.domain("tp", chips=list(range(n)), window=sum(bufs.values()) + 4096,
                          buffers=bufs) as d:
                info["t"] = d.transport(0, n - 1) if n > 1 else "self"
                for r in range(n):
                    o.write(d, r, "x", X)
                    o.write(d, r, "w1", np.ascontiguousarray(W1[:, r * F:(r + 1) * F]))
                    o.write(d, r, "w2", np.ascontiguousarray(W2[r * F:(r + 1) * F]))
                o.submit_domain(d, tp_callable, per_rank=[dict(scalars=[m])] * n)
                for r in range(n):
                    o.read(d, r, "y", Y[r])

        w.run(orch)
    print("tp_mlp: %d chips, %d rows, transport %s" % (n, m, info["t"]))
    for r in range(n):
        if not np.array_equal(Y[r], golden):
            print("FAIL: rank %d's Y differs from the numpy golden at %d places"
                  % (r, int((Y[r] != golden).sum())))
            return 1
    print("PASS")
    return 0


if __name__ == "__main__":
    sys.exit(main())
