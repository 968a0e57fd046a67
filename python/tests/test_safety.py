"""The binding used as an attacker would (issue 38): no wrong result with success, no crash,
and errors that say what, why and what to do."""
import os
import subprocess
import sys
import textwrap
import threading
import time

import numpy as np
import pytest

import plexus


# ---- an input and an output of one task that overlap ----

def test_partial_overlap_in_one_task_is_refused_naming_both(w, k):
    x = np.arange(64, dtype=np.float32)
    before = x.copy()
    with pytest.raises(plexus.InvalidArgument) as e:
        w.run(lambda o: o.submit(k.scale, inputs=[x[0:40]], outputs=[x[8:48]], scalars=[2.0]))
    msg = str(e.value)
    assert "argument 0" in msg and "argument 1" in msg and "exactly the same view" in msg, msg
    np.testing.assert_array_equal(x, before)  # nothing ran


def test_partial_overlap_of_a_staged_array_is_refused(w, k):
    # the whole array first, so that both views are views of its one staged copy (or of its
    # registered range in place): the runtime sees the overlap either way
    x = np.arange(64, dtype=np.float32)
    y = np.zeros_like(x)

    def orch(o):
        o.submit(k.scale, inputs=[x], outputs=[y], scalars=[1.0])
        o.submit(k.scale, inputs=[x[0:40]], outputs=[x[8:48]], scalars=[2.0])

    with pytest.raises(plexus.InvalidArgument, match="argument 0 .*argument 1"):
        w.run(orch)


def test_the_same_bytes_in_and_out_stay_allowed(w, k):
    x = np.arange(64, dtype=np.float32)
    w.run(lambda o: o.submit(k.scale, inputs=[x[8:48]], outputs=[x[8:48]], scalars=[2.0]))
    want = np.arange(64, dtype=np.float32)
    want[8:48] *= 2
    np.testing.assert_array_equal(x, want)


def test_partial_overlap_at_level3_is_refused():
    x = np.arange(64, dtype=np.float32)
    with plexus.Worker(level=3, chips=1, cores=1) as w3:
        for first in (False, True):  # refused by the staging, or by the runtime
            def orch(o):
                if first:
                    o.submit_host(lambda a: None, inputs=[x])
                o.submit_host(lambda a, b: None, inputs=[x[0:40]], outputs=[x[8:48]])

            with pytest.raises(plexus.InvalidArgument, match="argument [01] .*argument [01]"):
                w3.run(orch)


# ---- a view a kernel keeps ----

KEEP_SCRIPT = textwrap.dedent("""
    import gc
    import numpy as np
    import plexus

    kept = []

    @plexus.kernel
    def keep(x, y):
        kept.append((x, y))
        y[:] = x * 2

    a = np.arange(8.0)
    b = np.zeros(8)
    for mode in ("auto", "copy"):
        with plexus.Worker(cores=1, host_arrays=mode) as w:
            def orch(o):
                d = o.alloc(8, np.float64)
                o.submit(keep, inputs=[a], outputs=[d])
                o.submit(keep, inputs=[a], outputs=[b])
            w.run(orch)
    del a, b
    gc.collect()
    sums = [float(v.sum()) for pair in kept for v in pair]
    print("sums", sums)
    kept.clear()
    gc.collect()

    # closed while a kept view lives: the worker refuses work, the view still reads its bytes
    @plexus.kernel
    def keep1(y):
        y[:] = 5
        kept.append(y)

    w = plexus.Worker(cores=1)
    w.run(lambda o: o.submit(keep1, outputs=[o.alloc(16, np.float64)]))
    w.close()
    try:
        w.run(lambda o: None)
    except plexus.StateError as e:
        print("closed:", "closed" in str(e))
    print("kept after close", kept[0].tolist() == [5.0] * 16)
    kept.clear()  # the worker is destroyed now
    gc.collect()
    print("PASS")
""")


def test_a_kernel_that_keeps_its_views_cannot_crash_the_interpreter():
    # in a subprocess: a crash (rc -11) is this test's failure, not pytest's death
    r = subprocess.run([sys.executable, "-c", KEEP_SCRIPT], capture_output=True, text=True,
                       timeout=120, env=dict(os.environ))
    assert r.returncode == 0, "rc %d: %s" % (r.returncode, r.stderr[-2000:])
    assert "sums %s" % ([28.0, 56.0] * 4) in r.stdout and "PASS" in r.stdout, r.stdout
    assert "closed: True" in r.stdout and "kept after close True" in r.stdout, r.stdout


# ---- busy's scalar ----

def test_busy_reads_an_int_and_a_float_alike():
    out = np.zeros(1, np.int64)
    with plexus.Worker(cores=1) as w:
        k = plexus.builtin(w)
        took = []
        for v in (200, 200.0):
            t0 = time.monotonic()
            w.run(lambda o: o.submit(k.busy, outputs=[out], scalars=[v]))
            took.append(time.monotonic() - t0)
        x = np.arange(4, dtype=np.float32)
        y = np.zeros_like(x)
        w.run(lambda o: o.submit(k.scale, inputs=[x], outputs=[y], scalars=[3]))
    assert all(t >= 0.19 for t in took), took
    np.testing.assert_array_equal(y, 3 * x)


# ---- errors that say what to do ----

def test_a_kernel_of_another_workers_library_is_the_same_kernel():
    x = np.ones(4, np.float32)
    y = np.zeros(4, np.float32)
    with plexus.Worker(cores=1) as w1, plexus.Worker(cores=1) as w2:
        k1, k2 = plexus.builtin(w1), plexus.builtin(w2)
        w2.run(lambda o: o.submit(k2.scale, inputs=[x], outputs=[y], scalars=[2.0]))
        w2.run(lambda o: o.submit(k1.scale, inputs=[x], outputs=[y], scalars=[3.0]))
        assert y.tolist() == [3.0] * 4

        @plexus.kernel(name="plexus_pykernels.scale")
        def impostor(a, b, s):
            pass

        impostor.name = "plexus_pykernels.scale"  # a name taken by another function
        with pytest.raises(plexus.InvalidArgument, match="taken on this worker by another "
                                                         "function.*another name"):
            w2.run(lambda o: o.submit(impostor, inputs=[x], outputs=[y], scalars=[1.0]))


@pytest.mark.parametrize("after", [[-1], ["x"], [1 << 70], [None], [True]])
def test_bad_after_ids_are_invalid_arguments(after):
    with plexus.Worker(cores=1) as w:
        k = plexus.builtin(w)
        for call in (lambda o: o.submit(k.noop, after=after),
                     lambda o: o.submit_many(k.noop, n=2, after=after)):
            with pytest.raises(plexus.InvalidArgument, match="after= item 0 .* task ids"):
                w.run(call)


def test_submit_many_of_too_many_tasks_says_so():
    with plexus.Worker(cores=1) as w:
        k = plexus.builtin(w)
        with pytest.raises(plexus.OutOfMemory, match="n=1000000000000 tasks .* fewer tasks"):
            w.run(lambda o: o.submit_many(k.noop, n=10 ** 12))


def test_runs_from_two_threads_take_turns_and_overlap_is_refused():
    with plexus.Worker(cores=1) as w:
        started, done = threading.Event(), []

        def slow(o):
            started.set()
            time.sleep(0.3)

        def other():
            started.wait(30)
            try:
                w.run(lambda o: None)
                done.append("ran")
            except plexus.StateError as e:
                done.append(str(e))

        t = threading.Thread(target=other)
        t.start()
        w.run(slow)
        t.join(30)
        assert "one run at a time" in done[0] and "own plexus.Worker" in done[0]
        assert "nested" not in done[0]
        t = threading.Thread(target=lambda: done.append(w.run(lambda o: None)))
        t.start()
        t.join(30)
        assert isinstance(done[1], plexus.RunResult)  # turns are fine
        with pytest.raises(plexus.StateError, match="inside a run of the same worker"):
            w.run(lambda o: w.run(lambda o2: None))


def test_a_message_names_its_call_once():
    with plexus.Worker(level=3, chips=2, cores=1) as w3:
        def orch(o):
            with o.domain("g", chips=[0, 1], window=4096, buffers={"x": 64}) as d:
                o.allreduce(d, "nope", 4)

        with pytest.raises(plexus.InvalidArgument) as e:
            w3.run(orch)
    msg = str(e.value)
    assert "nope" in msg and msg.count("px_submit_allreduce") <= 1, msg
    err = plexus.errors
    plexus.lib.pxpy_set_error(plexus.lib.PX_EINVAL, b"o.thing: bad")
    assert str(err.error_from(plexus.lib.PX_EINVAL, "o.thing")) == "o.thing: bad"
