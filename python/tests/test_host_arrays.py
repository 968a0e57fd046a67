"""Host arrays in place (px_tensor_host) or staged, and how the run says which."""
import numpy as np
import pytest

import plexus


def test_kernels_see_the_arrays_own_memory():
    seen = []

    @plexus.kernel
    def touch(x, y):
        seen.append((x.__array_interface__["data"][0], y.__array_interface__["data"][0]))
        y[:] = x * 3

    a = np.arange(16, dtype=np.float64)
    b = np.zeros(16)
    with plexus.Worker(cores=1) as w:
        r = w.run(lambda o: o.submit(touch, inputs=[a], outputs=[b]))
    assert seen == [(a.ctypes.data, b.ctypes.data)]
    np.testing.assert_array_equal(b, a * 3)
    assert r.host_arrays == {"in_place": 2, "staged": 0, "reason": None}
    assert r.stats["tasks"] == 1  # no copy-back


def test_staged_when_asked_the_kernel_sees_a_copy():
    seen = []

    @plexus.kernel
    def touch(x):
        seen.append(x.__array_interface__["data"][0])

    a = np.arange(4.0)
    with plexus.Worker(cores=1, host_arrays="copy") as w:
        r = w.run(lambda o: o.submit(touch, inputs=[a]))
    assert seen and seen[0] != a.ctypes.data
    assert r.host_arrays["staged"] == 1 and r.host_arrays["in_place"] == 0


def test_writes_land_while_the_run_goes_on():
    # an in-place write is visible to a later kernel that reads the host array through
    # another view of the same bytes (the dependency comes from the bytes)
    got = []

    @plexus.kernel
    def fill(y):
        y[:] = 7

    @plexus.kernel
    def read(x):
        got.append(x.copy())

    buf = np.zeros(8)
    with plexus.Worker(cores=2) as w:
        w.run(lambda o: (o.submit(fill, outputs=[buf]), o.submit(read, inputs=[buf[2:6]])))
    assert got[0].tolist() == [7.0] * 4 and buf.tolist() == [7.0] * 8


def test_a_profile_without_host_mapping_stages_and_says_why():
    k = None
    a = np.arange(1024, dtype=np.float32)
    b = np.zeros_like(a)
    with plexus.Worker(cores=1, profile="host64k") as w:
        k = plexus.builtin(w)
        r = w.run(lambda o: o.submit(k.scale, inputs=[a], outputs=[b], scalars=[2.0]))
        np.testing.assert_array_equal(b, 2 * a)
        assert r.host_arrays["staged"] == 2 and r.host_arrays["in_place"] == 0
        assert "host64k" in r.host_arrays["reason"]
        assert r.stats["tasks"] == 2  # the scale and b's copy-back
    with plexus.Worker(cores=1, profile="host64k", host_arrays="in_place") as w:
        k = plexus.builtin(w)
        with pytest.raises(plexus.NotSupported, match="registering host memory"):
            w.run(lambda o: o.submit(k.scale, inputs=[a], outputs=[b], scalars=[2.0]))


def test_more_arrays_than_ranges_are_staged_past_the_limit():
    n = plexus.lib.PX_HOST_RANGES_MAX + 8
    xs = [np.full(4, i, np.float32) for i in range(n)]
    ys = [np.zeros(4, np.float32) for _ in range(n)]
    with plexus.Worker(cores=2) as w:
        k = plexus.builtin(w)
        r = w.run(lambda o: [o.submit(k.scale, inputs=[x], outputs=[y], scalars=[2.0])
                             for x, y in zip(xs, ys)])
    for i, y in enumerate(ys):
        np.testing.assert_array_equal(y, np.full(4, 2 * i, np.float32))
    h = r.host_arrays
    assert h["in_place"] == plexus.lib.PX_HOST_RANGES_MAX
    assert h["staged"] == 2 * n - plexus.lib.PX_HOST_RANGES_MAX
    assert "PX_HOST_RANGES_MAX" in h["reason"]


def test_views_of_one_buffer_take_one_range():
    n = plexus.lib.PX_HOST_RANGES_MAX * 2
    block = np.zeros((n, 4), np.float32)
    with plexus.Worker(cores=2) as w:
        k = plexus.builtin(w)
        r = w.run(lambda o: [o.submit(k.add_scalar, inputs=[block[i]], outputs=[block[i]],
                                      scalars=[float(i)]) for i in range(n)])
    np.testing.assert_array_equal(block, np.repeat(np.arange(n, dtype=np.float32), 4)
                                  .reshape(n, 4))
    # block[i] twice per task: two array objects each, all inside block's one range
    assert r.host_arrays == {"in_place": 2 * n, "staged": 0, "reason": None}


def test_mixing_in_place_and_staged_bytes_is_refused():
    # the limit forces staging; an array spanning in-place and staged bytes would see two
    # versions of them, so it is refused instead
    m = plexus.lib.PX_HOST_RANGES_MAX
    pool = np.zeros(4 * (m + 2), np.float32)
    with plexus.Worker(cores=1) as w:
        k = plexus.builtin(w)

        def orch(o):
            for i in range(m + 1):  # separate arrays over pool's bytes (not views of it)
                part = np.frombuffer(pool.data, np.float32, 4, 16 * i)
                o.submit(k.add_scalar, inputs=[part], outputs=[part], scalars=[1.0])
            both = np.frombuffer(pool.data, np.float32, 8, 16 * (m - 1))
            o.submit(k.add_scalar, inputs=[both], outputs=[both], scalars=[1.0])

        with pytest.raises(plexus.InvalidArgument, match="cannot be used both ways|cannot "
                           "be used in place itself"):
            w.run(orch)


def test_bad_host_arrays_values_are_refused():
    with pytest.raises(plexus.InvalidArgument, match="host_arrays"):
        plexus.Worker(host_arrays="zero-copy")
    with pytest.raises(plexus.InvalidArgument, match="level 3"):
        plexus.Worker(level=3, chips=2, host_arrays="in_place")


def test_level3_host_arrays_are_staged_with_the_reason():
    a = np.arange(8, dtype=np.float32)
    b = np.zeros_like(a)
    with plexus.Worker(level=3, chips=2, cores=1) as w:
        k = plexus.builtin(w)

        def host_scale(x, y):
            y[:] = 2 * x

        r = w.run(lambda o: o.submit_host(host_scale, inputs=[a], outputs=[b]))
    np.testing.assert_array_equal(b, 2 * a)
    assert r.host_arrays["in_place"] == 0 and "level-3" in r.host_arrays["reason"]


# ---- what the runtime's px_tensor_from_host made reachable (issue 38 part 2) ----

def test_a_column_works_both_ways_and_only_its_elements_change(w, k):
    # a non-contiguous view: in place the kernel gets the column's own strides; staged, the
    # copy holds its byte span and only the column's elements come back
    seen = []

    @plexus.kernel
    def bump(x):
        seen.append((x.strides, x.shape))
        x += 1

    m = np.arange(32, dtype=np.float64).reshape(8, 4)
    before = m.copy()
    r = w.run(lambda o: o.submit(bump, inouts=[m[:, 1]]))
    want = before.copy()
    want[:, 1] += 1
    np.testing.assert_array_equal(m, want)
    assert seen == [((32,), (8,))]
    assert r.host_arrays["staged" if w.host_arrays == "copy" else "in_place"] == 1


def test_columns_of_one_matrix_are_views_of_its_copy(w, k):
    # the whole matrix first: each column is then a view of its one copy (or of its one
    # registered range), and the tasks on different columns run on their own elements
    # (a Python kernel: the built-in C ones take contiguous tensors)
    @plexus.kernel
    def scale(x, y, s):
        y[:] = x * s

    m = np.ones((6, 4), np.float32)

    def orch(o):
        o.submit(scale, inputs=[m], outputs=[m], scalars=[1.0])
        for c in range(4):
            o.submit(scale, inputs=[m[:, c]], outputs=[m[:, c]], scalars=[float(c + 2)])

    r = w.run(orch)
    np.testing.assert_array_equal(m, np.tile(np.arange(2, 6, dtype=np.float32), (6, 1)))
    assert r.host_arrays["staged"] == (1 if w.host_arrays == "copy" else 0)


def test_a_read_only_output_is_refused_naming_the_argument(w, k):
    a = np.arange(8, dtype=np.float32)
    ro = np.zeros(8, np.float32)
    ro.flags.writeable = False
    with pytest.raises(plexus.InvalidArgument, match="argument 1: a task writes a read-only"):
        w.run(lambda o: o.submit(k.scale, inputs=[a], outputs=[ro], scalars=[2.0]))
    # read-only as an input is fine, and the array it was read from is not touched
    out = np.zeros(8, np.float32)
    w.run(lambda o: o.submit(k.scale, inputs=[ro], outputs=[out], scalars=[2.0]))
    assert out.tolist() == [0.0] * 8 and not ro.flags.writeable


def test_overlapping_strided_views_in_one_task_are_refused(w, k):
    # columns 0-1 in, columns 1-2 out: they share column 1 without being the same view,
    # in place and as views of one staged copy alike (args_check's rule)
    m = np.arange(24, dtype=np.float32).reshape(6, 4)
    before = m.copy()

    def orch(o):
        o.submit(k.noop, inputs=[m])
        o.submit(k.scale, inputs=[m[:, 0:2]], outputs=[m[:, 1:3]], scalars=[2.0])

    with pytest.raises(plexus.InvalidArgument, match="exactly the same view"):
        w.run(orch)
    np.testing.assert_array_equal(m, before)


def test_a_reversed_view_is_refused():
    with plexus.Worker(cores=1) as w:
        k = plexus.builtin(w)
        a = np.arange(8, dtype=np.float32)
        with pytest.raises(plexus.InvalidArgument, match="negative"):
            w.run(lambda o: o.submit(k.scale, inputs=[a[::-1]], outputs=[a.copy()],
                                     scalars=[1.0]))


def test_level3_restaging_after_a_scope_waits_for_the_copy_back():
    # each scope stages x again while the previous scope's copy-back (a host task) may still
    # be pending: the copy-in must wait for it. The package's own staging submitted that
    # copy-in at level 3 without the edge, and x came back as 4 or 8 instead of 32 with
    # success; the runtime's (px_tensor_from_host) passes the edge at every level
    x = np.ones(1 << 16, np.float64)

    def double(a):
        a *= 2

    def orch(o):
        for _ in range(5):
            with o.scope():
                o.submit_host(double, inouts=[x])

    with plexus.Worker(level=3, chips=1, cores=1) as w:
        for _ in range(3):
            x[:] = 1
            w.run(orch)
            np.testing.assert_array_equal(x, np.full(1 << 16, 32.0))
