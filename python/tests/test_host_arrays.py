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
