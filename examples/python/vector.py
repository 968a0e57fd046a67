#!/usr/bin/env python3
"""vector.py - the vector example from Python: f = (a+b+1)*(a+b+2) + (a+b), five dependent
tasks of the built-in C kernels per iteration, intermediates in a scope, checked against
numpy. Usage: vector.py [--size N] [--iters N] [--cores N]"""
import argparse
import sys

import numpy as np

import plexus


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--size", type=int, default=1 << 16)
    ap.add_argument("--iters", type=int, default=4)
    ap.add_argument("--cores", type=int, default=None)
    opt = ap.parse_args()
    n = opt.size
    a = (np.arange(n) % 13).astype(np.float32)
    b = ((7 * np.arange(n)) % 11).astype(np.float32)
    f = np.full((opt.iters, n), -1, np.float32)
    with plexus.Worker(cores=opt.cores) as w:
        k = plexus.builtin(w)

        def orch(o):
            for i in range(opt.iters):
                with o.scope():
                    c, d, e, g = (o.alloc(n, np.float32) for _ in range(4))
                    o.submit(k.add, inputs=[a, b], outputs=[c])
                    o.submit(k.add_scalar, inputs=[c], outputs=[d], scalars=[1.0])
                    o.submit(k.add_scalar, inputs=[c], outputs=[e], scalars=[2.0])
                    o.submit(k.mul, inputs=[d, e], outputs=[g])
                    o.submit(k.add, inputs=[g, c], outputs=[f[i]])

        r = w.run(orch)
    s = a + b
    golden = (s + 1) * (s + 2) + s
    # by hand: 5 tasks and 6 edges per iteration (the C example's counts), plus, where host
    # arrays are staged (a profile whose device cannot reach host memory), one copy-back of
    # f's row each (an edge from the task that wrote it)
    cb = opt.iters if r.host_arrays["staged"] else 0
    want = (5 * opt.iters + cb, 6 * opt.iters + cb)
    got = (r.stats["tasks"], r.stats["edges"])
    print("vector: size %d iters %d: %d tasks %d edges in %.3f ms"
          % (n, opt.iters, got[0], got[1], r.stats["wall_ns"] / 1e6))
    if not np.array_equal(f, np.broadcast_to(golden, f.shape)):
        print("FAIL: f differs from numpy at %d places" % int((f != golden).sum()))
        return 1
    if got != want:
        print("FAIL: %d tasks %d edges, expected %d and %d" % (got + want))
        return 1
    print("PASS")
    return 0


if __name__ == "__main__":
    sys.exit(main())
