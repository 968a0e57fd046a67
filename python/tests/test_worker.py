"""Workers, runs, tensors and scopes at level 2."""
import array
import os

import numpy as np
import pytest

import plexus
from conftest import copies


def test_issue_example(w, k):
    a = np.arange(1 << 20, dtype=np.float32)
    b = np.empty_like(a)

    def orch(o):
        o.submit(k.scale, inputs=[a], outputs=[b], scalars=[2.0])

    r = w.run(orch)
    np.testing.assert_array_equal(b, a * 2)
    # one task of the user's; staged, plus the copy-back of b with an edge from scale to it
    assert r.stats["tasks"] == 1 + copies(w, 1) and r.stats["edges"] == copies(w, 1)
    assert r.dfx == {}
    assert r.host_arrays == ({"in_place": 0, "staged": 2, "reason": None}
                             if w.host_arrays == "copy" else
                             {"in_place": 2, "staged": 0, "reason": None})


def test_dependencies_are_inferred_from_bytes(w, k):
    # vector: c = a+b; d = c+1; e = c+2; g = d*e; f = g+c (5 tasks, 6 edges; C example's
    # count), with the intermediates allocated in a scope; staged, f is copied back (+1 task,
    # +1 edge)
    n = 4096
    a = (np.arange(n) % 13).astype(np.float32)
    b = ((7 * np.arange(n)) % 11).astype(np.float32)
    f = np.full(n, -1, np.float32)

    def orch(o):
        with o.scope():
            c, d, e, g = (o.alloc(n, np.float32) for _ in range(4))
            o.submit(k.add, inputs=[a, b], outputs=[c])
            o.submit(k.add_scalar, inputs=[c], outputs=[d], scalars=[1.0])
            o.submit(k.add_scalar, inputs=[c], outputs=[e], scalars=[2.0])
            o.submit(k.mul, inputs=[d, e], outputs=[g])
            o.submit(k.add, inputs=[g, c], outputs=[f])

    r = w.run(orch)
    s = a + b
    np.testing.assert_array_equal(f, (s + 1) * (s + 2) + s)
    assert r.stats["tasks"] == 5 + copies(w, 1) and r.stats["edges"] == 6 + copies(w, 1)


def test_run_result_stats_match_w_stats(w, k):
    x = np.ones(8, np.float32)
    y = np.zeros(8, np.float32)
    r = w.run(lambda o: [o.submit(k.scale, inputs=[x], outputs=[y], scalars=[3.0])
                         for _ in range(10)])
    assert r.stats == w.stats()
    assert set(r.stats) >= {"tasks", "edges", "wall_ns", "heap_peak"}
    assert r.stats["tasks"] == 10 + copies(w, 1)  # ten scales, staged: one copy-back
    np.testing.assert_array_equal(y, 3 * x)


def test_args_in_any_order_and_scalar_kinds(w):
    got = []

    @plexus.kernel
    def probe(x, f, i, u, z):
        got.append((f, i, u, x.flags.writeable, z.flags.writeable))
        z[:] = x * f

    x = np.arange(4, dtype=np.float64)
    z = np.zeros(4)
    w.run(lambda o: o.submit(probe, args=[plexus.In(x), 0.5, -3, plexus.U64(2 ** 64 - 1),
                                          plexus.Out(z)]))
    assert got == [(0.5, -3, 2 ** 64 - 1, False, True)]
    np.testing.assert_array_equal(z, x * 0.5)


def test_views_inside_a_staged_array(w, k):
    a = np.arange(64, dtype=np.float32).reshape(8, 8)
    out = np.zeros((8, 8), np.float32)

    def orch(o):
        o.submit(k.scale, inputs=[a], outputs=[out], scalars=[1.0])
        for r in range(8):  # rows of out: contiguous views inside the staged out
            o.submit(k.add_scalar, inputs=[out[r]], outputs=[out[r]], scalars=[float(r)])

    w.run(orch)
    np.testing.assert_array_equal(out, a + np.arange(8, dtype=np.float32)[:, None])


def test_restaging_after_a_scope_waits_for_the_copy_back(w, k):
    x = np.ones(1000, np.float32)

    def orch(o):
        for _ in range(5):
            with o.scope():
                o.submit(k.scale, inputs=[x], outputs=[x], scalars=[2.0])

    w.run(orch)
    np.testing.assert_array_equal(x, np.full(1000, 32, np.float32))


@pytest.mark.parametrize("dt", [np.float32, np.float64, np.int32, np.int64, np.uint8])
def test_dtypes_both_ways(w, dt):
    @plexus.kernel
    def twice(x, z):
        assert x.dtype == np.dtype(dt) and z.dtype == np.dtype(dt)
        z[:] = x * 2

    x = np.arange(10).astype(dt)
    z = np.zeros(10, dt)
    w.run(lambda o: o.submit(twice, inputs=[x], outputs=[z]))
    np.testing.assert_array_equal(z, x * 2)
    assert plexus.np_dtype(plexus.px_dtype(dt)) == np.dtype(dt)


def test_buffer_protocol_and_array_interface(w, k):
    src = array.array("f", [1, 2, 3, 4])
    dst = bytearray(16)

    class Iface:
        def __init__(self, a):
            self.__array_interface__ = a.__array_interface__
            self._a = a

    out = np.zeros(4, np.float32)
    w.run(lambda o: o.submit(k.scale, inputs=[src], outputs=[memoryview(dst).cast("f")],
                             scalars=[2.0]))
    assert np.frombuffer(dst, np.float32).tolist() == [2, 4, 6, 8]
    w.run(lambda o: o.submit(k.scale, inputs=[Iface(np.frombuffer(dst, np.float32))],
                             outputs=[Iface(out)], scalars=[0.5]))
    assert out.tolist() == [1, 2, 3, 4]


def test_dlpack(w, k):
    a = np.arange(6, dtype=np.float32)

    class Dl:  # only __dlpack__: plexus goes through np.from_dlpack
        def __dlpack__(self, stream=None):
            return a.__dlpack__()

        def __dlpack_device__(self):
            return a.__dlpack_device__()

    out = np.zeros(6, np.float32)
    w.run(lambda o: o.submit(k.scale, inputs=[Dl()], outputs=[out], scalars=[3.0]))
    np.testing.assert_array_equal(out, 3 * a)


def test_device_tensor_numpy_view(w, k):
    seen = []
    a = np.arange(16, dtype=np.float32)

    @plexus.kernel
    def look(x):
        seen.append(x.copy())

    def orch(o):
        t = o.alloc((4, 4), np.float32)
        assert t.shape == (4, 4) and t.dtype == np.float32
        t.numpy()[:] = a.reshape(4, 4)  # before any task touches it
        o.submit(look, inputs=[t])

    w.run(orch)
    np.testing.assert_array_equal(seen[0], a.reshape(4, 4))


def test_refusals_say_why(w, k):
    a = np.zeros((4, 4), np.float32)
    cases = [
        (dict(inputs=[a[::-1, 1]], outputs=[np.zeros(4, np.float32)], scalars=[1.0]),
         "negative"),
        (dict(inputs=[None], outputs=[a]), "is None"),
        (dict(inputs=[[1.0, 2.0]], outputs=[a]), "is a list"),
        (dict(inputs=[np.zeros(4, np.complex64)], outputs=[a]), "no plexus equivalent"),
        (dict(inputs=[np.zeros(0, np.float32)], outputs=[a]), "is empty"),
        (dict(inputs=[a], outputs=[a], scalars=[None]), "scalar argument 2 is None"),
        (dict(inputs=[a], outputs=[a], scalars=["x"]), "is a str"),
        (dict(inputs=[a] * 17), "at most 16"),
    ]
    for kw, why in cases:
        with pytest.raises(plexus.InvalidArgument, match=why):
            w.run(lambda o: o.submit(k.scale, **kw))
    ro = np.zeros(4, np.float32)
    ro.flags.writeable = False
    with pytest.raises(plexus.InvalidArgument, match="read-only"):
        w.run(lambda o: o.submit(k.scale, inputs=[ro], outputs=[ro], scalars=[1.0]))
    b = np.arange(8, dtype=np.float32)

    def part_then_whole(o):
        o.submit(k.scale, inputs=[b[:4]], outputs=[b[:4]], scalars=[2.0])
        o.submit(k.scale, inputs=[b], outputs=[b], scalars=[3.0])

    if w.host_arrays == "copy":  # one device copy per host array: the part came first
        with pytest.raises(plexus.InvalidArgument, match="overlaps"):
            w.run(part_then_whole)
    else:  # in place the bytes are the array's own: the whole follows the part
        w.run(part_then_whole)
        np.testing.assert_array_equal(b, np.arange(8) * np.array([6] * 4 + [3] * 4))
    with pytest.raises(plexus.InvalidArgument, match="not a kernel"):
        w.run(lambda o: o.submit(print, inputs=[a]))
    with pytest.raises(plexus.InvalidArgument, match="without a tag"):
        w.run(lambda o: o.submit(k.scale, args=[a, a, 1.0]))


def test_the_c_signature_checks_arguments(w, k):
    a = np.zeros(4, np.int32)
    with pytest.raises(plexus.InvalidArgument) as e:
        w.run(lambda o: o.submit(k.scale, inputs=[a], outputs=[a.copy()], scalars=[1.0]))
    assert "scale" in str(e.value)


def test_orchestration_exceptions_propagate_and_worker_goes_on(w, k):
    class Mine(Exception):
        pass

    def orch(o):
        raise Mine("from the orchestration")

    with pytest.raises(Mine):
        w.run(orch)
    x = np.ones(4, np.float32)
    y = np.zeros(4, np.float32)
    w.run(lambda o: o.submit(k.scale, inputs=[x], outputs=[y], scalars=[5.0]))
    assert y.tolist() == [5, 5, 5, 5]


def test_stale_handles_are_refused(w, k):
    keep = {}

    def orch(o):
        keep["o"] = o
        with o.scope():
            keep["t"] = o.alloc(4)

        with pytest.raises(plexus.StateError, match="after its scope ended"):
            keep["t"].numpy()

    w.run(orch)
    with pytest.raises(plexus.StateError, match="has returned"):
        keep["o"].submit(k.noop)
    with pytest.raises(plexus.StateError, match="w.run inside a run"):
        w.run(lambda o: w.run(lambda o2: None))


def test_closed_worker_is_refused():
    w = plexus.Worker(cores=1)
    w.close()
    w.close()  # twice is fine
    with pytest.raises(plexus.StateError, match="closed"):
        w.run(lambda o: None)
    with pytest.raises(plexus.StateError, match="closed"):
        w.stats()


def test_knobs_and_bad_values():
    with plexus.Worker(cores=1, heap_ring="8M", task_ring=256) as w:
        assert w.cores == 1
        assert "PLEXUS_TASK_RING" in w.config_text()
    with pytest.raises(plexus.InvalidArgument, match="unknown knob"):
        plexus.Worker(no_such_knob=1)
    with pytest.raises(plexus.InvalidArgument, match="PLEXUS_TASK_RING"):
        plexus.Worker(task_ring=3)  # not a power of two
    with pytest.raises(plexus.InvalidArgument, match="level"):
        plexus.Worker(level=7)
    with pytest.raises(plexus.InvalidArgument):
        plexus.Worker(profile="no-such-profile")


def test_heap_ring_exhaustion_is_an_error_not_a_crash():
    with plexus.Worker(cores=1, heap_ring="1M", device_mem="64M", host_arrays="copy") as w:
        big = np.zeros(1 << 20, np.float32)  # 4 MiB > the heap ring
        with pytest.raises(plexus.Error) as e:
            w.run(lambda o: o.submit(plexus.builtin(w).scale, inputs=[big], outputs=[big],
                                     scalars=[1.0]))
        assert "HEAP_RING" in str(e.value)


def test_scopes_in_a_loop_each_own_their_tensors(w, k):
    # every iteration's o.alloc belongs to its own scope; a later scope at the same depth
    # must not find its tensors "ended" (the ids of ended scopes are never reused)
    x = np.arange(32, dtype=np.float32)
    out = np.zeros((3, 32), np.float32)

    def orch(o):
        for i in range(3):
            with o.scope():
                t = o.alloc(32)
                o.submit(k.scale, inputs=[x], outputs=[t], scalars=[float(i)])
                with o.scope():
                    u = o.alloc(32)
                    o.submit(k.add, inputs=[t, x], outputs=[u])
                    o.submit(k.add_scalar, inputs=[u], outputs=[out[i]], scalars=[0.0])

    w.run(orch)
    np.testing.assert_array_equal(out, np.stack([x * (i + 1) for i in range(3)]))


def test_the_fast_path_still_refuses_what_the_checking_path_refuses(w, k):
    # the second submit of a staged array takes submit's fast path; its mistakes must still
    # be reported by the checking path
    x = np.ones(4, np.float32)
    y = np.zeros(4, np.float32)
    ro = np.ones(4, np.float32)
    ro.flags.writeable = False

    def orch(o, bad):
        o.submit(k.scale, inputs=[x], outputs=[y], scalars=[1.0])
        o.submit(k.scale, inputs=[ro], outputs=[y], scalars=[1.0])
        o.submit(k.scale, **bad)

    for bad, why in [(dict(inputs=[x], outputs=[y], scalars=[2 ** 70]), "does not fit int64"),
                     (dict(inputs=[x], outputs=[y], scalars=[True]), "is True"),
                     (dict(inputs=[x], outputs=[ro], scalars=[1.0]), "read-only"),
                     (dict(inputs=[x] * 9, outputs=[y] * 8), "at most 16")]:
        with pytest.raises(plexus.InvalidArgument, match=why):
            w.run(lambda o: orch(o, bad))
    w.run(lambda o: [o.submit(k.scale, inputs=[x], outputs=[y], scalars=[float(i)])
                     for i in range(4)])
    assert y.tolist() == [3.0] * 4


def test_bad_shapes_are_errors(w):
    for shape, exc in [((-1,), plexus.InvalidArgument), ((2,) * 6, plexus.InvalidArgument),
                       ((1 << 62, 1 << 62), plexus.InvalidArgument),
                       ((1 << 40,), plexus.Error)]:
        with pytest.raises(exc):
            w.run(lambda o: o.alloc(shape, np.float32))
    with pytest.raises(plexus.InvalidArgument, match="not a dtype"):
        w.run(lambda o: o.alloc(4, "no-such-dtype"))
