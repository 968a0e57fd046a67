"""Level 3 from Python: chips are forked processes running Python callables and kernels."""
import os
import signal
import threading

import numpy as np
import pytest

import plexus
from busy import MatmulThread, numpy_blas


@plexus.kernel
def pyscale(x, z, s):
    z[:] = x * s


@plexus.kernel
def whoami(z):
    z[:] = [plexus.chip_index(), os.getpid()]


@plexus.kernel
def die(x):
    os.kill(os.getpid(), signal.SIGKILL)


@plexus.callable
def scale_on_chip(o, x, z):
    o.submit(pyscale, inputs=[x], outputs=[z], scalars=[float(plexus.chip_index() + 1)])


@plexus.callable
def c_scale_on_chip(o, x, z, s):
    o.submit(C["scale"], inputs=[x], outputs=[z], scalars=[s])


@plexus.callable
def batch_on_chip(o, x, z, s):
    # three writers of z in one batch: the last one's result stays (WAW order)
    o.submit_many(C["scale"], inputs=[x], outputs=[z], scalars=[[1.0, 2.0, s]])


@plexus.callable
def who_on_chip(o, z):
    o.submit(whoami, outputs=[z])


@plexus.callable
def die_on_chip(o, x):
    o.submit(die, inputs=[x])


@plexus.callable
def host_array_on_chip(o, x):
    o.submit(pyscale, inputs=[np.zeros(4)], outputs=[x], scalars=[1.0])


C = {}


@pytest.fixture
def w3():
    with plexus.Worker(level=3, chips=2, cores=1) as w:
        C["scale"] = plexus.builtin(w).scale
        w.register(pyscale, whoami, die, scale_on_chip, c_scale_on_chip, who_on_chip,
                   die_on_chip, host_array_on_chip, batch_on_chip)
        yield w


def test_python_callables_and_kernels_run_in_chip_processes(w3):
    a = np.arange(64, dtype=np.float32)
    b = np.zeros((2, 64), np.float32)
    who = np.zeros((2, 2), np.int64)

    def orch(o):
        assert o.level == 3 and o.chips == 2
        for c in range(2):
            o.submit_next_level(scale_on_chip, c, inputs=[a], outputs=[b[c]])
            o.submit_next_level(who_on_chip, c, outputs=[who[c]])

    w3.run(orch)
    np.testing.assert_array_equal(b[0], a)
    np.testing.assert_array_equal(b[1], 2 * a)
    assert who[:, 0].tolist() == [0, 1]
    assert len(set(who[:, 1].tolist()) | {os.getpid()}) == 3  # two chip processes


def test_c_kernels_in_chips_and_groups(w3):
    a = np.arange(32, dtype=np.float32)
    b = np.zeros((2, 32), np.float32)
    w3.run(lambda o: o.submit_group(c_scale_on_chip, [0, 1],
                                    [dict(inputs=[a], outputs=[b[i]], scalars=[3.0 + i])
                                     for i in range(2)]))
    np.testing.assert_array_equal(b, np.stack([3 * a, 4 * a]))


def test_submit_many_inside_a_chip_and_refused_on_the_host(w3):
    a = np.arange(16, dtype=np.float32)
    b = np.zeros((2, 16), np.float32)
    w3.run(lambda o: [o.submit_next_level(batch_on_chip, c, inputs=[a], outputs=[b[c]],
                                          scalars=[5.0 + c]) for c in range(2)])
    np.testing.assert_array_equal(b, np.stack([5 * a, 6 * a]))
    with pytest.raises(plexus.InvalidArgument, match="level 3"):
        w3.run(lambda o: o.submit_many(C["scale"], inputs=[a], outputs=[b[0]], scalars=[1.0],
                                       n=2))


def test_host_tasks(w3):
    a = np.arange(10, dtype=np.float64)
    b = np.zeros(10)
    tids = []

    def host(x, y):
        tids.append(threading.get_ident())
        y[:] = x ** 2

    w3.run(lambda o: o.submit_host(host, inputs=[a], outputs=[b]))
    np.testing.assert_array_equal(b, a ** 2)
    assert tids and tids[0] != threading.get_ident()


def test_registration_after_the_chips_started_is_refused(w3):
    w3.run(lambda o: None)

    @plexus.kernel
    def late(x):
        pass

    with pytest.raises(plexus.StateError, match="before"):
        w3.register(late)


def test_a_host_array_inside_a_chip_is_refused(w3):
    x = np.zeros(4)
    with pytest.raises(plexus.InvalidArgument, match="private copy"):
        w3.run(lambda o: o.submit_next_level(host_array_on_chip, 0, outputs=[x]))


def test_a_dead_chip_is_peer_dead_with_chip_and_pid(w3):
    x = np.zeros(4)
    with pytest.raises(plexus.PeerDead) as e:
        w3.run(lambda o: o.submit_next_level(die_on_chip, 1, inputs=[x]))
    assert e.value.peer == 1 and e.value.pid not in (None, os.getpid())


def test_level2_refuses_level3_calls(w, k):
    with pytest.raises(plexus.StateError, match="level-3"):
        w.run(lambda o: o.submit_host(print))


def level3_beside(mm):
    """A level-3 run whose chips fork while mm multiplies: Python callables and kernels run in
    them, and mm keeps multiplying, rightly."""
    assert mm.wait_for(1)  # busy before the fork
    a = np.arange(64, dtype=np.float32)
    b = np.zeros((2, 64), np.float32)
    with plexus.Worker(level=3, chips=2, cores=1) as w:
        w.register(pyscale, scale_on_chip)
        w.run(lambda o: [o.submit_next_level(scale_on_chip, c, inputs=[a], outputs=[b[c]])
                         for c in range(2)])
        np.testing.assert_array_equal(b, np.stack([a, 2 * a]))
    n = mm.done
    assert mm.wait_for(n + 2)  # still multiplying, right


def test_level3_in_a_threaded_process():
    # issue 34: the chips fork while another thread multiplies matrices (numpy's BLAS)
    mm = MatmulThread()
    mm.start()
    try:
        level3_beside(mm)
    finally:
        assert mm.stop()
    assert mm.bad == 0


def test_numpy_openblas_gets_its_threads_back():
    # with numpy on OpenBLAS's pthreads build: its pool is quiesced for the fork (one thread)
    # and given its thread count back after it
    path, blas_threads = numpy_blas()
    if not blas_threads:
        pytest.skip("numpy's BLAS is not OpenBLAS's pthreads build (%s)" % path)
    before = blas_threads()
    if before < 2:
        pytest.skip("numpy's OpenBLAS (%s) runs 1 thread: no pool to quiesce" % path)
    mm = MatmulThread()
    mm.start()
    try:
        level3_beside(mm)
        assert blas_threads() == before
    finally:
        assert mm.stop()
    assert mm.bad == 0


def test_chips_started_by_a_thread_that_ends():
    # the chips are forked by a thread that ends before the runs: they live on (no parent-death
    # signal tied to that thread) and run Python callables for the main thread
    a = np.arange(16, dtype=np.float32)
    b = np.zeros((2, 16), np.float32)
    with plexus.Worker(level=3, chips=2, cores=1) as w:
        w.register(pyscale, scale_on_chip)
        errors = []

        def init():
            try:
                w.init()
            except Exception as e:  # noqa: BLE001 - re-raised below, on the test's thread
                errors.append(e)

        t = threading.Thread(target=init)
        t.start()
        t.join()
        if errors:
            raise errors[0]
        w.run(lambda o: [o.submit_next_level(scale_on_chip, c, inputs=[a], outputs=[b[c]])
                         for c in range(2)])
    np.testing.assert_array_equal(b, np.stack([a, 2 * a]))
