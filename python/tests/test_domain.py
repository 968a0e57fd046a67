"""Domains from Python: transports and reasons, orchestration collectives, the kernel's
communicator."""
import numpy as np
import pytest

import plexus

TRANSPORT = {"default": "direct", "a2a3-pcie": "staged"}


@plexus.kernel(comm=True)
def ring(m, comm):
    g = comm.buffer("grad", np.float32)
    g[:m] = comm.rank + 1
    comm.barrier()
    comm.allreduce(g[:m])
    nxt = (comm.rank + 1) % comm.size
    comm.put_signal(nxt, g[m:m + 4], np.full(4, 100 + comm.rank, np.float32), sig=0)
    comm.wait_until(0, ">=", 1, timeout=10)
    prev = (comm.rank - 1) % comm.size
    got = np.zeros(4, np.float32)
    comm.get(prev, g[:4], got)        # prev's reduced values
    g[m + 4:m + 8] = got
    comm.signal(nxt, 1, 5, op="set")
    comm.wait_until(1, "==", 5, timeout=10)
    g[m + 8] = comm.signal_read(1)
    g[m + 9] = comm.transport(nxt) == ("direct" if TRANSPORT_NOW[0] == "default" else "staged")


@plexus.kernel(comm=True)
def colls(comm):
    n = comm.size
    b = comm.buffer("b", np.int64)
    b[:n] = 0
    b[comm.rank] = comm.rank + 10
    comm.allgather(b[:n])
    c = comm.buffer("c", np.int64)
    c[:4] = comm.rank * 7 if comm.rank == 1 else -1
    comm.broadcast(c[:4], root=1)


@plexus.kernel(comm=True)
def waits_forever(comm):
    comm.wait_until(0, "==", 99, timeout=0.2)


@plexus.callable
def ring_rank(o, m, dom):
    o.submit(ring, scalars=[m], domain=dom)


@plexus.callable
def colls_rank(o, dom):
    o.submit(colls, domain=dom)


@plexus.callable
def wait_rank(o, dom):
    o.submit(waits_forever, domain=dom)


TRANSPORT_NOW = ["default"]


def worker(profile):
    TRANSPORT_NOW[0] = profile
    w = plexus.Worker(level=3, chips=2, cores=1, profile=profile)
    w.register(ring, colls, waits_forever, ring_rank, colls_rank, wait_rank)
    return w


@pytest.mark.parametrize("profile", ["default", "a2a3-pcie"])
def test_transport_reason_and_orchestration_allreduce(profile):
    out = np.zeros((2, 64), np.float32)
    seen = {}
    with worker(profile) as w:
        def orch(o):
            with o.domain("grads", chips=[0, 1], window=1 << 16,
                          buffers={"grad": 256}, signals=2) as d:
                seen["t"] = (d.transport(0, 1), d.reason(0, 1), d.size)
                for r in range(2):
                    o.write(d, r, "grad", np.arange(64, dtype=np.float32) * (r + 1))
                o.allreduce(d, "grad", 64, np.float32, "sum")
                for r in range(2):
                    o.read(d, r, "grad", out[r])
        w.run(orch)
    assert seen["t"][0] == TRANSPORT[profile] and seen["t"][2] == 2
    assert ("peer_map=1" if profile == "default" else "peer_map=0") in seen["t"][1]
    np.testing.assert_array_equal(out, np.stack([np.arange(64) * 3] * 2).astype(np.float32))


@pytest.mark.parametrize("profile", ["default", "a2a3-pcie"])
def test_communicator_in_a_python_kernel(profile):
    out = np.zeros((2, 64), np.float32)
    with worker(profile) as w:
        def orch(o):
            with o.domain("ring", chips=[0, 1], window=1 << 16, buffers={"grad": 256},
                          signals=2) as d:
                o.submit_domain(d, ring_rank, per_rank=[dict(scalars=[16])] * 2)
                for r in range(2):
                    o.read(d, r, "grad", out[r])
        w.run(orch)
    for r in range(2):
        assert out[r, :16].tolist() == [3.0] * 16          # allreduce of 1 and 2
        assert out[r, 16:20].tolist() == [100.0 + (1 - r)] * 4   # the peer's put_signal
        assert out[r, 20:24].tolist() == [3.0] * 4         # get from the peer
        assert out[r, 24] == 5 and out[r, 25] == 1         # signal set, transport name


def test_collectives_in_a_python_kernel():
    b = np.zeros((2, 2), np.int64)
    c = np.zeros((2, 4), np.int64)
    with worker("default") as w:
        def orch(o):
            with o.domain("c", chips=[1, 0], window=4096, buffers={"b": 64, "c": 64}) as d:
                o.submit_domain(d, colls_rank)
                for r in range(2):
                    o.read(d, r, "b", b[r])
                    o.read(d, r, "c", c[r])
        w.run(orch)
    assert b.tolist() == [[10, 11], [10, 11]]
    assert c.tolist() == [[7] * 4, [7] * 4]


def test_wait_timeout_is_plexus_timeout():
    with worker("default") as w:
        def orch(o):
            with o.domain("t", chips=[0, 1], window=4096, buffers={"x": 64}, signals=1) as d:
                o.submit_domain(d, wait_rank)
        with pytest.raises(plexus.Timeout) as e:
            w.run(orch)
        assert isinstance(e.value, TimeoutError)


def test_domain_misuse_is_refused():
    with worker("default") as w:
        keep = {}

        def orch(o):
            with pytest.raises(plexus.InvalidArgument):
                o.domain("bad", chips=[0, 0], window=4096, buffers={"x": 64})
            with pytest.raises(plexus.InvalidArgument, match="> 0 bytes"):
                o.domain("bad", chips=[0, 1], window=4096, buffers={"x": 0})
            with o.domain("ok", chips=[0, 1], window=4096, buffers={"x": 64}) as d:
                with pytest.raises(plexus.InvalidArgument, match="no ranks"):
                    d.transport(0, 5)
                with pytest.raises(plexus.InvalidArgument):
                    o.allreduce(d, "x", 16, np.float32, "avg")
                keep["d"] = d
            with pytest.raises(plexus.StateError, match="released"):
                o.allreduce(keep["d"], "x", 16)
        w.run(orch)
        with pytest.raises(plexus.StateError, match="released"):
            keep["d"].transport(0, 1)


@plexus.kernel(comm=True)
def more_colls(comm):
    n, r = comm.size, comm.rank
    rs = comm.buffer("rs", np.int64)[:2 * n]
    rs[:] = np.arange(2 * n) + 100 * r       # block j (2 elements) of rank r
    comm.reduce_scatter(rs, op="sum")          # block r of rank r: the sum of every rank's
    a2a = comm.buffer("a2a", np.int32)[:n]
    a2a[:] = 10 * r + np.arange(n)             # block j goes to rank j
    comm.alltoall(a2a)
    send = comm.buffer("send", np.float64)[:3 * n]
    recv = comm.buffer("recv", np.float64)[:3 * n]
    send[:] = r * 1000 + np.arange(3 * n)
    recv[:] = -1
    # rank r sends j+1 elements to rank j from offset 3j; they land at 3r of rank j
    comm.alltoallv(send, [j + 1 for j in range(n)], [3 * j for j in range(n)],
                   recv, [r + 1] * n, [3 * i for i in range(n)])


@plexus.callable
def more_rank(o, dom):
    o.submit(more_colls, domain=dom)


def test_reduce_scatter_alltoall_alltoallv_in_a_python_kernel():
    n = 2
    rs = np.zeros((n, 2 * n), np.int64)
    a2a = np.zeros((n, n), np.int32)
    recv = np.zeros((n, 3 * n), np.float64)
    with plexus.Worker(level=3, chips=n, cores=1) as w:
        w.register(more_colls, more_rank)

        def orch(o):
            bufs = {"rs": 8 * 2 * n, "a2a": 4 * n, "send": 8 * 3 * n, "recv": 8 * 3 * n}
            with o.domain("m", chips=list(range(n)), window=8192, buffers=bufs) as d:
                o.submit_domain(d, more_rank)
                for r in range(n):
                    o.read(d, r, "rs", rs[r])
                    o.read(d, r, "a2a", a2a[r])
                    o.read(d, r, "recv", recv[r])
        w.run(orch)
    for r in range(n):
        want = sum(np.arange(2 * n) + 100 * q for q in range(n))
        assert rs[r, 2 * r:2 * r + 2].tolist() == want[2 * r:2 * r + 2].tolist()
        assert a2a[r].tolist() == [10 * q + r for q in range(n)]
        for q in range(n):  # from rank q: r+1 elements of q's send at 3r, placed at 3q
            got = recv[r, 3 * q:3 * q + r + 1].tolist()
            assert got == [q * 1000 + 3 * r + i for i in range(r + 1)]


def test_orchestration_collectives_of_every_kind():
    n = 2
    out = {}
    with plexus.Worker(level=3, chips=n, cores=1) as w:
        def orch(o):
            with o.domain("o", chips=[0, 1], window=1 << 14,
                          buffers={"g": 8 * 2 * n, "s": 8 * 2 * n, "b": 32, "t": 8 * n}) as d:
                for r in range(n):
                    o.write(d, r, "g", np.array([0] * (2 * n), np.int64) + np.eye(
                        1, 2 * n, 2 * r, dtype=np.int64)[0] * (r + 5)
                        + np.eye(1, 2 * n, 2 * r + 1, dtype=np.int64)[0] * (r + 7))
                    o.write(d, r, "s", np.full(2 * n, r + 1, np.float64))
                    o.write(d, r, "b", np.full(8, r + 3, np.float32))
                    o.write(d, r, "t", np.array([10 * r + j for j in range(n)], np.int64))
                o.allgather(d, "g", 2, np.int64)
                o.reduce_scatter(d, "s", 2, np.float64, "prod")
                o.broadcast(d, "b", 8, np.float32, root=1)
                o.alltoall(d, "t", 1, np.int64)
                for name, dt, cnt in (("g", np.int64, 2 * n), ("s", np.float64, 2 * n),
                                      ("b", np.float32, 8), ("t", np.int64, n)):
                    out[name] = np.zeros((n, cnt), dt)
                    for r in range(n):
                        o.read(d, r, name, out[name][r])
        w.run(orch)
    for r in range(n):
        assert out["g"][r].tolist() == [5, 7, 6, 8]
        assert out["s"][r, 2 * r:2 * r + 2].tolist() == [2.0, 2.0]  # 1 * 2
        assert out["b"][r].tolist() == [4.0] * 8
        assert out["t"][r].tolist() == [10 * q + r for q in range(n)]


def test_revoke_then_shrink_goes_on():
    """d.revoke(): a submit on d raises plexus.Revoked; d.shrink(o) with nobody dead gives a
    domain of the same chips, generation 1, on which an allreduce is right."""
    out = np.zeros((4, 64), np.float32)
    seen = {}
    with plexus.Worker(level=3, chips=4, cores=1) as w:
        def orch(o):
            with o.domain("dp", chips=[0, 1, 2, 3], window=1 << 16,
                          buffers={"grad": 256}) as d:
                d.revoke()
                d.revoke()  # twice is fine
                try:
                    o.allreduce(d, "grad", 64, np.float32, "sum")
                except plexus.Revoked as e:
                    seen["revoked"] = str(e)
                nd = d.shrink(o)
                seen["nd"] = (nd.generation, nd.size, [nd.chip(r) for r in range(nd.size)],
                              d.generation)
                for r in range(4):
                    o.write(nd, r, "grad", np.arange(64, dtype=np.float32) * (r + 1))
                o.allreduce(nd, "grad", 64, np.float32, "sum")
                for r in range(4):
                    o.read(nd, r, "grad", out[r])
                nd.release()
        w.run(orch)
    assert "revoked by the orchestration" in seen["revoked"]
    assert seen["nd"] == (1, 4, [0, 1, 2, 3], 0)
    np.testing.assert_array_equal(out, np.stack([np.arange(64) * 10] * 4).astype(np.float32))
