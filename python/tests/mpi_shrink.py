"""Revoke and shrink of a domain spanning hosts, from Python (issue 37), under mpirun:

    mpirun -np 2 /usr/bin/python3 python/tests/mpi_shrink.py

(ctest mpi.python_shrink_2x2; not a pytest file: it needs mpirun). Every host makes a level-3
worker of 2 chips; chip 1 of host 1 kills itself as it enters its second collective
(PLEXUS_TEST_FAULT, set here). Each step is one run, on every host:

  1. a domain over every host's chips, host-major (w.job_chips(), kept across runs): each
     host writes a marker and an input into its own ranks (d.local_ranks); the allreduce is
     checked bit for bit against the rank-order fold of every rank's input;
  2. another allreduce: chip 1 of host 1 dies in it; the run raises plexus.PeerDead (or
     plexus.Revoked) on every host;
  3. nd = d.shrink(o) on every host (again after a PeerDead: a death during it): generation
     1, every chip but the dead one in the old order; each survivor's marker carried; the
     allreduce on nd bit for bit the rank-order fold of the survivors' inputs; then nd shrunk
     again (nobody else dead, d not released): generation 2, the same members, the markers
     carried once more, the allreduce checked again;
  4. a spanning allocation of the survivors (every host has finished step 3), then host 1's
     orchestration revokes the latest domain and its own next submit on it raises
     plexus.Revoked at once, while host 0's allreduce on it (waiting for host 1's ranks)
     raises plexus.Revoked naming "the orchestration of host 1" well under the deadline
     (PLEXUS_COMM_TIMEOUT_S, 20 s in ctest);
  5. every domain released.
Prints "host H of 2: ..." and PASS, exit 0, when every step held on this host; else
"FAIL: <why>" and exit 1.
"""
import os
import sys
import time
from typing import Dict, List

os.environ["PLEXUS_TEST_FAULT"] = "host:1:chip:1:kill:coll:2"  # before the chips start

import numpy as np  # noqa: E402

import plexus  # noqa: E402

CHIPS = 2
COUNT = 1000         # the allreduce's doubles
REVOKE_COUNT = COUNT  # the doubles of host 0's allreduce that the revoke stops (past the
                      # proxies' inline bytes: its segments go by rendezvous)
RELEASE_S = 10.0     # the release after the revoke, at most (a cut-off call's sends are
                     # left after 1 s; the deadline is 600 s)
MARK = 64            # marker doubles
QUICK_S = 5.0        # a revoke seen on every host within this (the deadline is 20 s)
DEAD = CHIPS + 1     # the global id (host * CHIPS + chip) of chip 1 of host 1


def inputs(g: int) -> np.ndarray:
    """The input of the member with global id g: not integers, so the fold's order shows in
    the bits."""
    i = np.arange(COUNT, dtype=np.float64)
    return 0.1 * (g + 1) + 1e-3 * i + 1.0 / (3.0 + g)


def fold(ids: List[int]) -> np.ndarray:
    """The serial rank-order fold of the inputs of ids (in rank order)."""
    acc = inputs(ids[0])
    for g in ids[1:]:
        acc = acc + inputs(g)
    return acc


def marker(g: int) -> np.ndarray:
    return 1000.0 * g + np.arange(MARK, dtype=np.float64)


def same_bits(a: np.ndarray, b: np.ndarray) -> bool:
    return a.shape == b.shape and bool(np.all(a.view(np.uint64) == b.view(np.uint64)))


def say(text: str) -> None:
    """Writes text and its newline in one write (the hosts' lines reach mpirun's output
    whole: print's separate newline let another host's line in before it)."""
    sys.stdout.write(text + "\n")
    sys.stdout.flush()


class Failed(Exception):
    """A step did not hold."""


def global_id(d: plexus.Domain, r: int) -> int:
    host, chip = d.member(r)
    return host * CHIPS + chip


def allreduce_checked(o: plexus.Orchestration, d: plexus.Domain, out: Dict[int, np.ndarray],
                      marks: Dict[int, np.ndarray]) -> None:
    """Writes every local rank's input into "x", allreduces it, reads "x" and "m" back."""
    for r in d.local_ranks:
        o.write(d, r, "x", inputs(global_id(d, r)))
    o.allreduce(d, "x", COUNT, np.float64, "sum")
    for r in d.local_ranks:
        out[r] = np.zeros(COUNT, np.float64)
        marks[r] = np.zeros(MARK, np.float64)
        o.read(d, r, "x", out[r])
        o.read(d, r, "m", marks[r])


def check_sums(d: plexus.Domain, out: Dict[int, np.ndarray], ids: List[int], what: str):
    want = fold(ids)
    for r, got in out.items():
        if not same_bits(got, want):
            bad = int(np.argmax(got.view(np.uint64) != want.view(np.uint64)))
            raise Failed("%s: rank %d (chip %d of host %d): element %d is %.17g, the "
                         "rank-order fold %.17g" % (what, r, d.member(r)[1], d.member(r)[0],
                                                    bad, got[bad], want[bad]))


def check_shrunk(nd: plexus.Domain, generation: int, survivors: List[int], s: dict) -> list:
    """nd is generation `generation` over the survivors in the old order; each local rank's
    marker carried and the allreduce read in s["out"] bit for bit the survivors' fold."""
    members = [nd.chip(r) for r in range(nd.size)]
    want = [plexus.chip_global(g // CHIPS, g % CHIPS) for g in survivors]
    if nd.generation != generation or members != want:
        raise Failed("the shrunk domain is generation %d of chips %s; expected generation %d "
                     "of %s" % (nd.generation, [hex(c) for c in members], generation,
                                [hex(c) for c in want]))
    for r, m in s["marks"].items():
        if not same_bits(m, marker(global_id(nd, r))):
            raise Failed("rank %d of generation %d: its marker is %s..., expected %s... (the "
                         "window was not carried)" % (r, generation, m[:3],
                                                     marker(global_id(nd, r))[:3]))
    check_sums(nd, s["out"], survivors, "the allreduce of generation %d" % generation)
    return members


def steps(w: plexus.Worker) -> str:
    host, hosts = w.host, w.hosts
    if hosts != 2:
        raise Failed("run it under mpirun -np 2 (w.hosts is %d)" % hosts)
    s = {}
    buffers = {"x": COUNT * 8, "m": MARK * 8}

    def alloc(o, name="py", keep=True):
        return o.domain(name, chips=w.job_chips(), window=(COUNT + MARK) * 8 + 128,
                        buffers=buffers, keep=keep)

    # 1. every rank's marker and input; the allreduce checked
    def fill(o):
        d = s["d"] = alloc(o)
        for r in d.local_ranks:
            o.write(d, r, "m", marker(global_id(d, r)))
        s["out"], s["marks"] = {}, {}
        allreduce_checked(o, d, s["out"], s["marks"])
    w.run(fill)
    d = s["d"]
    if not d.spans_hosts or d.local_ranks != [CHIPS * host + c for c in range(CHIPS)]:
        raise Failed("the domain's ranks here are %s (spans hosts: %s); expected %s"
                     % (d.local_ranks, d.spans_hosts,
                        [CHIPS * host + c for c in range(CHIPS)]))
    check_sums(d, s["out"], list(range(hosts * CHIPS)), "the first allreduce")

    # 2. the death: the run fails on every host
    try:
        w.run(lambda o: o.allreduce(d, "x", COUNT, np.float64, "sum"))
        raise Failed("the allreduce with chip 1 of host 1 dead passed")
    except (plexus.PeerDead, plexus.Revoked) as e:
        say("host %d: the run with a member dead raised %s: %s"
            % (host, type(e).__name__, e))
        if isinstance(e, plexus.PeerDead) and "of host 1: chip" in str(e) and \
                (e.peer, e.host) != (1, 1):
            raise Failed("PeerDead names chip 1 of host 1, but its .peer, .host are %r, %r"
                         % (e.peer, e.host))

    # 3. the shrink, on every host; the windows carried; the survivors' allreduce
    def shrink(o):
        nd = s["nd"] = d.shrink(o)
        s["out"], s["marks"] = {}, {}
        allreduce_checked(o, nd, s["out"], s["marks"])
    for tries in range(3):
        try:
            w.run(shrink)
            break
        except plexus.PeerDead as e:  # a death during the shrink: every host calls it again
            say("host %d: shrink %d: %s; again" % (host, tries + 1, e))
    else:
        raise Failed("the shrink failed 3 times")
    survivors = [g for g in range(hosts * CHIPS) if g != DEAD]
    members = check_shrunk(s["nd"], 1, survivors, s)

    # 3b. the shrink's domain shrunk again (nobody else dead, d not released): generation 2,
    # the same members, the markers carried once more
    def shrink_again(o):
        s["nd2"] = s["nd"].shrink(o)
        s["out"], s["marks"] = {}, {}
        allreduce_checked(o, s["nd2"], s["out"], s["marks"])
    w.run(shrink_again)
    check_shrunk(s["nd2"], 2, survivors, s)
    nd = s["nd2"]

    # 4. host 1 revokes nd (generation 2); host 0's next operation on it raises Revoked
    def revoke(o):
        with o.domain("sync", chips=nd.chips, window=4096, buffers={"x": 64}):
            pass  # a spanning allocation: every host is past step 3
        if host == 1:
            nd.revoke()
            try:
                o.allreduce(nd, "x", COUNT, np.float64, "sum")
                s["own"] = "the submit after the revoke passed"
            except plexus.Revoked as e:
                s["own"] = str(e)
        else:
            s["t0"] = time.monotonic()
            # a pair allreduce past the inline bytes, which the revoke cuts off: its sends to
            # host 1 may never finish, and the release below must not wait for them
            o.allreduce(nd, "x", REVOKE_COUNT, np.float64, "sum")
    if host == 1:
        w.run(revoke)
        if "revoked by the orchestration" not in s["own"]:
            raise Failed("host 1's submit after its revoke: %s" % s["own"])
        seen = s["own"]
    else:
        try:
            w.run(revoke)
            raise Failed("host 0's allreduce on the revoked domain passed")
        except plexus.Revoked as e:
            took = time.monotonic() - s["t0"]
            if "the orchestration of host 1" not in str(e) or took > QUICK_S:
                raise Failed("host 0 got Revoked after %.2f s (at most %.0f), saying: %s"
                             % (took, QUICK_S, e))
            seen = "%s (after %.2f s)" % (e, took)
    say("host %d: the revoke: %s" % (host, seen))

    # 5. the release
    def release(o):
        for x in (d, s["nd"], nd):
            x.release()
    t0 = time.monotonic()
    w.run(release)
    if time.monotonic() - t0 > RELEASE_S:
        raise Failed("the release after the revoke took %.1f s (at most %.0f)"
                     % (time.monotonic() - t0, RELEASE_S))
    return ("%d ranks shrunk to %d by every host from Python (chip 1 of host 1 dead), the "
            "markers carried, the allreduce bit for bit the rank-order fold before and after, "
            "and again after a second shrink; revoked by host 1's orchestration, seen by "
            "host 0" % (hosts * CHIPS, len(members)))


def main() -> int:
    host = "?"
    try:
        with plexus.Worker(level=3, chips=CHIPS, cores=1, device_mem="16M",
                           heap_ring="4M") as w:
            w.init()
            host = w.host
            info = steps(w)
            say("host %d of %d: %s\nPASS" % (host, w.hosts, info))
        return 0
    except Exception as e:  # noqa: BLE001 - every failure is this host's FAIL line
        say("host %s: FAIL: %s: %s" % (host, type(e).__name__, e))
        return 1


if __name__ == "__main__":
    sys.exit(main())
