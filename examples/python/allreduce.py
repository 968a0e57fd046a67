#!/usr/bin/env python3
"""allreduce.py - an orchestration-level allreduce over the chips of a level-3 worker on
every comm transport: direct (profile default), staged (profile a2a3-pcie, no peer mapping)
and staged forced on a profile that could map (comm_transport=staged). Each rank r starts
with x_r[i] = (r+1) * (i % 17); every rank must end with the sum over ranks, in every dtype.
Usage: allreduce.py [--chips N] [--count N]"""
import argparse
import sys

import numpy as np

import plexus

SETUPS = [("direct", dict(profile="default")),
          ("staged", dict(profile="a2a3-pcie")),
          ("staged", dict(profile="default", comm_transport="staged"))]


def run(n, count, dtype, op, kw):
    out = np.zeros((n, count), dtype)
    info = {}
    with plexus.Worker(level=3, chips=n, cores=1, **kw) as w:
        def orch(o):
            nbytes = count * np.dtype(dtype).itemsize
            with o.domain("ar", chips=list(range(n)), window=nbytes + 4096,
                          buffers={"buf": nbytes}) as d:
                info["t"] = sorted({d.transport(a, b) for a in range(n) for b in range(n)
                                    if a != b})
                info["why"] = d.reason(0, 1)
                for r in range(n):
                    o.write(d, r, "buf", ((r + 1) * (np.arange(count) % 17)).astype(dtype))
                o.allreduce(d, "buf", count, dtype, op)
                for r in range(n):
                    o.read(d, r, "buf", out[r])
        w.run(orch)
    return out, info


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--chips", type=int, default=2)
    ap.add_argument("--count", type=int, default=4096)
    opt = ap.parse_args()
    n, count = opt.chips, opt.count
    ok = True
    for want, kw in SETUPS:
        for dtype in (np.float32, np.float64, np.int32, np.int64):
            out, info = run(n, count, dtype, "sum", kw)
            golden = (sum(range(1, n + 1)) * (np.arange(count) % 17)).astype(dtype)
            good = all(np.array_equal(out[r], golden) for r in range(n))
            print("allreduce: %s %d chips x %d %s: transport %s (%s): %s"
                  % (kw, n, count, np.dtype(dtype).name, ",".join(info["t"]), info["why"],
                     "ok" if good else "WRONG"))
            if info["t"] != [want]:
                print("FAIL: expected transport %s, got %s" % (want, info["t"]))
                ok = False
            ok = ok and good
    print("PASS" if ok else "FAIL: a rank's result differs from the sum over ranks")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
