"""What a Python orchestration needs for a domain over every host's chips (level 4), checked on
one host: plexus.chip_global, w.hosts / w.host / w.job_chips(), a domain kept across runs
(keep=True), d.member / d.local_ranks / d.spans_hosts. The same under mpirun, with a death, a
shrink and a revoke across hosts, is python/tests/mpi_shrink.py (ctest mpi.python_shrink_2x2).
"""
import numpy as np
import pytest

import plexus


@pytest.fixture(scope="module")
def w3():
    with plexus.Worker(level=3, chips=3, cores=1, device_mem="16M", heap_ring="4M") as w:
        yield w


def test_chip_global_names_a_chip_of_a_host():
    assert plexus.chip_global(0, 0) == plexus.lib.PX_CHIP_GLOBAL_BIT
    assert plexus.chip_global(1, 3) == plexus.lib.PX_CHIP_GLOBAL_BIT | 1 << 16 | 3
    for host, chip in ((-1, 0), (0, -1), (plexus.lib.PX_CHIP_HOSTS_MAX, 0),
                       (0, plexus.lib.PX_CHIP_HOST_CHIPS), (1 << 40, 0)):
        with pytest.raises(ValueError, match="host must be 0..16383 and chip 0..65535"):
            plexus.chip_global(host, chip)


def test_hosts_are_known_once_the_worker_started():
    with plexus.Worker(level=3, chips=2, cores=1, device_mem="16M", heap_ring="4M") as w:
        with pytest.raises(plexus.StateError, match=r"call w.init\(\) first"):
            w.hosts
        with pytest.raises(plexus.StateError, match=r"call w.init\(\) first"):
            w.job_chips()
        w.init()
        assert (w.hosts, w.host, w.job_chips()) == (1, 0, [0, 1])


def test_a_kept_domain_outlives_its_run_and_its_shrink_too(w3):
    """keep=True: allocated in one run, reduced in the next, shrunk (nobody dead) in a third,
    the shrink's domain shrunk again in a fourth (the older ones not released) and used in a
    fifth; a domain without keep is gone after its run."""
    s = {}
    n = 3
    out = np.zeros((n, 16), np.float64)

    def alloc(o):
        d = s["d"] = o.domain("kept", chips=w3.job_chips(), window=4096,
                              buffers={"x": 128}, keep=True)
        s["plain"] = o.domain("plain", chips=[0, 1], window=4096, buffers={"x": 128})
        for r in d.local_ranks:
            o.write(d, r, "x", np.arange(16, dtype=np.float64) * (r + 1))
    w3.run(alloc)
    d = s["d"]
    assert (d.keep, d.spans_hosts, d.local_ranks) == (True, False, [0, 1, 2])
    assert [d.member(r) for r in range(n)] == [(0, 0), (0, 1), (0, 2)]

    def reduce(o):
        with pytest.raises(plexus.StateError, match="released"):
            o.allreduce(s["plain"], "x", 16, np.float64)
        o.allreduce(d, "x", 16, np.float64)
        for r in range(n):
            o.read(d, r, "x", out[r])
    w3.run(reduce)
    np.testing.assert_array_equal(out, np.stack([np.arange(16) * 6.0] * n))

    w3.run(lambda o: s.update(nd=d.shrink(o)))
    nd = s["nd"]
    assert (nd.keep, nd.generation, nd.local_ranks) == (True, 1, [0, 1, 2])

    w3.run(lambda o: s.update(nd2=nd.shrink(o)))  # a shrink's shrink, d not released
    nd2 = s["nd2"]
    assert (nd2.keep, nd2.generation, nd2.chips) == (True, 2, [0, 1, 2])

    def again(o):
        for old in (d, nd):
            with pytest.raises(plexus.Revoked):
                o.allreduce(old, "x", 16, np.float64)
        o.allreduce(nd2, "x", 16, np.float64)  # the windows carried twice: 6x, summed again
        for r in range(n):
            o.read(nd2, r, "x", out[r])
        for x in (d, nd, nd2):
            x.release()
    w3.run(again)
    np.testing.assert_array_equal(out, np.stack([np.arange(16) * 18.0] * n))
    with pytest.raises(plexus.StateError, match="released"):
        nd2.local_ranks


def test_a_run_that_fails_frees_the_domains_it_kept(w3):
    s = {}

    def fails(o):
        s["d"] = o.domain("lost", chips=[0, 1], window=4096, buffers={"x": 64}, keep=True)
        raise plexus.InvalidArgument("the orchestration fails on purpose")
    with pytest.raises(plexus.InvalidArgument, match="on purpose"):
        w3.run(fails)
    with pytest.raises(plexus.StateError, match="released"):
        s["d"].size


def test_global_chips_need_mpi(w3):
    """Chips named as chips of hosts, in a worker that runs alone: refused by the allocation,
    saying what to do."""
    def orch(o):
        with pytest.raises(plexus.InvalidArgument, match="does not run under MPI"):
            o.domain("g", chips=[plexus.chip_global(0, c) for c in range(2)], window=4096,
                     buffers={"x": 64})
    w3.run(orch)
