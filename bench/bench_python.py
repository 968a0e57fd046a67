#!/usr/bin/env python3
"""bench_python - the per-task cost of driving plexus from Python, against C and Dask.

Graphs (bench_tasks' independent and chain, same accesses and so the same edges):
  independent  task t reads one shared tensor (IN): 0 edges
  chain        task t reads and writes T[t mod 8] (INOUT): 8 chains, tasks - 8 edges
Systems, each with 2 threads running tasks, timed from the first submit to the end of the
drain, median over interleaved repetitions:
  c           the graph submitted from C (libbench_python_c.so's bp_run_c), its C kernels
  plexus_py_batch  the same C kernels, loaded by name, submitted from a Python orchestration
              in one o.submit_many call (per-task arguments as numpy arrays): the normal
              way to submit many tiny tasks from Python
  plexus_py   the same, one o.submit call per task
  plexus_pyk  independent only: a @plexus.kernel doing the same check in Python
  dask        dask.threaded.get over the same graph as a raw task dict, Python task functions
  threadpool  concurrent.futures.ThreadPoolExecutor(2); a chain task waits on its
              predecessor's future
Every kernel and task function checks the value its place in the graph implies and counts
its runs, so a lost edge or task fails the benchmark. Prints BENCH python lines with
python_over_c (plexus_py_batch over c, per task), percall_over_c (plexus_py over c),
dask_over_plexus (dask over plexus_py_batch) and dask_over_percall (dask over plexus_py).
Usage: bench_python [--quick | --smoke]   (docs/benchmarks.md, "bench_python")
"""
import concurrent.futures as cf
import os
import platform
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
# installed as build/bin/bench_python: the package is build/python, the C side build/lib
for p in (os.path.join(HERE, "..", "python"),):
    if os.path.isdir(os.path.join(p, "plexus")):
        sys.path.insert(0, os.path.abspath(p))

import numpy as np  # noqa: E402
import cffi  # noqa: E402

import plexus  # noqa: E402

NAME = "python"
THREADS = 2
CHAINS = 8
PAD = 8
MAGIC = 0x5eed5eed5eed
MODES = {  # tasks for plexus and C, tasks for dask and the thread pool, repetitions
    "full": (200000, 20000, 7),
    "quick": (20000, 4000, 3),
    "smoke": (200, 100, 1),
}


def fail(msg):
    print("BENCH %s FAIL: %s" % (NAME, msg))
    sys.exit(1)


def c_side():
    lib_path = os.path.join(HERE, "..", "lib", "libbench_python_c.so")
    ffi = cffi.FFI()
    ffi.cdef("int bp_run_c(int graph, uint64_t ntasks, int cores, double *seconds, "
             "uint64_t *edges); void bp_counts(uint64_t *runs, uint64_t *violations);")
    try:
        return ffi, ffi.dlopen(os.path.abspath(lib_path)), os.path.abspath(lib_path)
    except OSError as e:
        fail("cannot open %s (%s): build it with `make`" % (lib_path, e))


def counts(ffi, clib):
    r = ffi.new("uint64_t *")
    v = ffi.new("uint64_t *")
    clib.bp_counts(r, v)
    return r[0], v[0]


def run_c(ffi, clib, graph, n):
    sec = ffi.new("double *")
    edges = ffi.new("uint64_t *")
    st = clib.bp_run_c(graph, n, THREADS, sec, edges)
    if st != 0:
        fail("C run failed: %s" % ffi.string(plexus.lib.px_last_error()).decode())
    runs, bad = counts(ffi, clib)
    check(graph, n, runs, bad, edges[0], "c")
    return sec[0] / n * 1e6


def check(graph, n, runs, bad, edges, who):
    want_edges = 0 if graph == 0 else n - CHAINS
    if runs != n or bad != 0 or (edges is not None and edges != want_edges):
        fail("%s graph %d: %d runs of %d tasks, %d violations, %s edges (want %d)"
             % (who, graph, runs, n, bad, edges, want_edges))


def run_plexus(w, kern, graph, n, ffi, clib, batch):
    block = np.zeros(CHAINS * PAD, np.int64)
    block[0] = MAGIC if graph == 0 else 0
    rows = [block[j * PAD:j * PAD + 1] for j in range(CHAINS)]
    shared = rows[0]
    got = []
    who = "plexus_py_batch" if batch else "plexus_py"

    if batch and graph == 0:
        def orch(o):
            got.append(o.submit_many(kern, inputs=[shared], scalars=[np.arange(n)]))
    elif batch:
        def orch(o):
            t = np.arange(n)
            got.append(o.submit_many(kern, inouts=[plexus.Pick(rows, t % CHAINS)],
                                     scalars=[t, t // CHAINS]))
    elif graph == 0:
        def orch(o):
            sub = o.submit
            for t in range(n):
                sub(kern, inputs=(shared,), scalars=(t,))
    else:
        def orch(o):
            sub = o.submit
            for t in range(n):
                sub(kern, inouts=(rows[t % CHAINS],), scalars=(t, t // CHAINS))

    t0 = time.perf_counter()
    r = w.run(orch)
    dt = time.perf_counter() - t0
    runs, bad = counts(ffi, clib)
    # staged (a profile whose device cannot reach host memory), the copy-back of the written
    # rows adds one task and one edge per chain; in place there is none
    extra = CHAINS if graph == 1 and r.host_arrays["staged"] else 0
    check(graph, n, runs, bad, r.stats["edges"] - extra, who)
    if graph == 1 and block[::PAD].tolist() != [n // CHAINS + (j < n % CHAINS)
                                                for j in range(CHAINS)]:
        fail("%s chain: the chains ended at %s" % (who, block[::PAD].tolist()))
    if batch and (len(got[0]) != n or np.any(np.diff(got[0].astype(np.int64)) != 1)):
        fail("%s: submit_many returned %d ids, not %d consecutive ones" % (who, len(got[0]), n))
    return dt / n * 1e6


_pyk_state = {"runs": 0, "bad": 0}


@plexus.kernel(name="bp_py_independent")
def py_independent(x, t):
    _pyk_state["runs"] += 1
    if x[0] != MAGIC:
        _pyk_state["bad"] += 1


def run_plexus_pyk(w, n):
    _pyk_state.update(runs=0, bad=0)
    block = np.zeros(PAD, np.int64)
    block[0] = MAGIC
    shared = block[:1]

    def orch(o):
        sub = o.submit
        for t in range(n):
            sub(py_independent, inputs=(shared,), scalars=(t,))

    t0 = time.perf_counter()
    r = w.run(orch)
    dt = time.perf_counter() - t0
    check(0, n, _pyk_state["runs"], _pyk_state["bad"], r.stats["edges"], "plexus_pyk")
    return dt / n * 1e6


def dask_graph(graph, n, state, block):
    def ind(t):
        state["runs"] += 1
        if block[0] != MAGIC:
            state["bad"] += 1

    def chain(prev, j, t):
        state["runs"] += 1
        if block[j * PAD] != t // CHAINS:
            state["bad"] += 1
        block[j * PAD] += 1
        return t

    dsk = {}
    if graph == 0:
        for t in range(n):
            dsk[("t", t)] = (ind, t)
    else:
        for t in range(n):
            prev = ("t", t - CHAINS) if t >= CHAINS else None
            dsk[("t", t)] = (chain, prev, t % CHAINS, t)
    return dsk


def run_dask(graph, n):
    import dask.threaded
    state = {"runs": 0, "bad": 0}
    block = np.zeros(CHAINS * PAD, np.int64)
    block[0] = MAGIC if graph == 0 else 0
    t0 = time.perf_counter()
    dsk = dask_graph(graph, n, state, block)
    dask.threaded.get(dsk, list(dsk), num_workers=THREADS)
    dt = time.perf_counter() - t0
    check(graph, n, state["runs"], state["bad"], None, "dask")
    return dt / n * 1e6


def run_pool(graph, n):
    state = {"runs": 0, "bad": 0}
    block = np.zeros(CHAINS * PAD, np.int64)
    block[0] = MAGIC if graph == 0 else 0

    def ind(t):
        state["runs"] += 1
        if block[0] != MAGIC:
            state["bad"] += 1

    def chain(prev, j, t):
        if prev is not None:
            prev.result()
        state["runs"] += 1
        if block[j * PAD] != t // CHAINS:
            state["bad"] += 1
        block[j * PAD] += 1

    t0 = time.perf_counter()
    with cf.ThreadPoolExecutor(max_workers=THREADS) as ex:
        if graph == 0:
            futs = [ex.submit(ind, t) for t in range(n)]
        else:
            futs = []
            for t in range(n):
                futs.append(ex.submit(chain, futs[t - CHAINS] if t >= CHAINS else None,
                                      t % CHAINS, t))
        for f in futs:
            f.result()
    dt = time.perf_counter() - t0
    check(graph, n, state["runs"], state["bad"], None, "threadpool")
    return dt / n * 1e6


def main(argv):
    mode = "full"
    for a in argv:
        if a in ("--quick", "--smoke"):
            mode = a[2:]
        elif a in ("-h", "--help"):
            print(__doc__)
            return 0
        else:
            print("bench_python: unknown option %r; use --quick, --smoke or --help" % a)
            return 2
    n, nd, reps = MODES[mode]
    try:
        import dask
        dask_version = dask.__version__
    except ImportError as e:
        if mode != "smoke":
            fail("the Dask anchor is missing (%s): run `make deps-bench` (python3-dask)" % e)
        dask_version = None
        print("BENCH %s system=dask skipped=python3-dask_is_not_installed" % NAME)
    ffi, clib, path = c_side()
    print("BENCH %s config mode=%s threads=%d tasks=%d anchor_tasks=%d reps=%d chains=%d "
          "host_arrays=auto python=%s numpy=%s cffi=%s dask=%s plexus=%s" % (
              NAME, mode, THREADS, n, nd, reps, CHAINS, platform.python_version(),
              np.__version__, cffi.__version__, dask_version or "absent", plexus.__version__))
    res = {}
    with plexus.Worker(cores=THREADS) as w:
        kl = w.load_kernels(path, names=["bp_independent", "bp_chain"])
        kerns = [kl.bp_independent, kl.bp_chain]
        for rep in range(reps):
            for g in (0, 1):
                res.setdefault((g, "c"), []).append(run_c(ffi, clib, g, n))
                res.setdefault((g, "plexus_py"), []).append(
                    run_plexus(w, kerns[g], g, n, ffi, clib, False))
                res.setdefault((g, "plexus_py_batch"), []).append(
                    run_plexus(w, kerns[g], g, n, ffi, clib, True))
                if g == 0:
                    res.setdefault((g, "plexus_pyk"), []).append(run_plexus_pyk(w, nd))
                if dask_version:
                    res.setdefault((g, "dask"), []).append(run_dask(g, nd))
                res.setdefault((g, "threadpool"), []).append(run_pool(g, nd))
    for g, gname in ((0, "independent"), (1, "chain")):
        med = {s: statistics.median(v) for (gg, s), v in res.items() if gg == g}
        for s in ("c", "plexus_py_batch", "plexus_py", "plexus_pyk", "dask", "threadpool"):
            if s in med:
                kernel = {"c": "c", "plexus_py": "c", "plexus_py_batch": "c"}.get(s, "python")
                print("BENCH %s graph=%s system=%s kernel=%s tasks=%d us_per_task=%.3f" % (
                    NAME, gname, s, kernel, nd if s in ("plexus_pyk", "dask", "threadpool")
                    else n, med[s]))
        batch, percall = med["plexus_py_batch"], med["plexus_py"]
        line = "BENCH %s graph=%s python_over_c=%.2f percall_over_c=%.2f" % (
            NAME, gname, batch / med["c"], percall / med["c"])
        if "dask" in med:
            line += " dask_over_plexus=%.1f dask_over_percall=%.1f" % (med["dask"] / batch,
                                                                      med["dask"] / percall)
        line += " threadpool_over_plexus=%.1f" % (med["threadpool"] / batch)
        if "plexus_pyk" in med:
            line += " pykernel_over_ckernel=%.2f" % (med["plexus_pyk"] / med["plexus_py"])
        print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
