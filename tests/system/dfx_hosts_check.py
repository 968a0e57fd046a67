#!/usr/bin/env python3
"""dfx_hosts_check.py - checks the level-4 DFX outputs of a run on several hosts under MPI.

usage: dfx_hosts_check.py DIR HOSTS CHIPS COLLECTIVE [KERNEL]
       dfx_hosts_check.py dead DIR HOSTS CHIPS H:C KERNEL STEPS

DIR holds the outputs of `mpirun -np HOSTS plexus run EXAMPLE --chips CHIPS --iters 1 --dfx
all --out DIR`, written by host 0. Checks, with Python's own JSON parser:
  dfx.json: level 4, HOSTS hosts in order, each with its host id, directory, clock offset
    (host 0: 0), uncertainty (half the least of 16 round trips: > 0 and under 50 ms for the
    other hosts), the level-3 members of its own dfx.json (CHIPS chips, reconciled), no host
    missing, reconciled true; each host's own files under DIR/hosts/host<h>/;
  trace.json: one process per host and per chip, pid h * 1000 + k, named "host h (id): ..."
    (the host's orchestration and each chip); every comm span carries its host (its process's),
    its peer and its transport; spans of every host's chips; and the clocks aligned: the
    n-th COLLECTIVE span of every chip of every host overlap in time (a collective cannot end
    on one rank before it started on another), within the clock uncertainty;
  report.html: a group per host (above its processes') and per process, named as in
    trace.json; with KERNEL its critical
    path runs from a host task into a chip's KERNEL task.

The second form checks the outputs of `mpirun -np HOSTS plexus run train_loop --chips CHIPS
--kill-chip H:C ... --dfx all --out DIR` (chip C of host H killed; the survivors shrink the
domain spanning every host and go on: STEPS more KERNEL tasks each):
  dfx.json: no host missing; host H's entry names chip C in chips_missing, every other
    host's none; on every level (the top, which is host 0's, and each host's entry) the
    domain a shrink made has as members every chip but C of host H as {"host", "chip"} in
    host-major order, and excludes one rank: {"rank": H * CHIPS + C, "host": H, "chip": C,
    "why": "...died..."}; the domain it was made from has every chip as a member (and, STEPS
    0: the members' kernels shrank it first, its kernel_generations is generation 1 of those
    survivors, excluding that rank the same way);
  trace.json: no process for the dead chip; on every survivor's track (of every host) a
    comm.revoke, comm.agree (excluding chip C of host H, with why) and comm.shrink (to
    HOSTS * CHIPS - 1 survivors: the orchestration's, or with STEPS 0 the kernel's), then STEPS
    KERNEL tasks after the shrink.
Prints PASS or FAIL: <reason>.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from dfx_check import fail, load  # noqa: E402
from dfx_l3_check import report_data  # noqa: E402

PIDS = 1000  # HIER_DFX_HOST_PIDS


def check_dfx(d, hosts, chips):
    x = load(os.path.join(d, "dfx.json"))
    if x.get("level") != 4 or x.get("nhosts") != hosts:
        fail("dfx.json: level %r, nhosts %r; expected 4, %d" % (x.get("level"), x.get("nhosts"),
                                                               hosts))
    if x.get("hosts_missing") != [] or x.get("reconciled") is not True:
        fail("dfx.json: hosts_missing %r, reconciled %r" % (x.get("hosts_missing"),
                                                            x.get("reconciled")))
    hs = x.get("hosts", [])
    if [h.get("host") for h in hs] != list(range(hosts)):
        fail("dfx.json: hosts %r, expected 0..%d" % ([h.get("host") for h in hs], hosts - 1))
    for h in hs:
        who = "dfx.json host %d" % h["host"]
        for k in ("host_id", "pid", "dir", "clock_offset_us", "clock_uncertainty_us",
                  "clock_rounds", "clock_rate_ppm", "shift_us", "collectors"):
            if k not in h:
                fail("%s: no %s" % (who, k))
        if h["dir"] != "hosts/host%d" % h["host"] or h["trace_pid_base"] != PIDS * h["host"]:
            fail("%s: dir %r, trace_pid_base %r" % (who, h["dir"], h["trace_pid_base"]))
        if h["host"] == 0:
            if h["clock_offset_us"] != 0 or h["clock_uncertainty_us"] != 0:
                fail("%s: host 0's clock is the reference, offset %r" % (who,
                                                                         h["clock_offset_us"]))
        elif not (h["clock_estimated"] and h["clock_rounds"] == 16 and
                  0 < h["clock_uncertainty_us"] < 50000):
            fail("%s: clock not estimated by 16 round trips (%r rounds, uncertainty %r us)"
                 % (who, h["clock_rounds"], h["clock_uncertainty_us"]))
        if h.get("level") != 3 or len(h.get("chips", [])) != chips or \
                h.get("reconciled") is not True:
            fail("%s: its level-3 members: level %r, %d chips, reconciled %r"
                 % (who, h.get("level"), len(h.get("chips", [])), h.get("reconciled")))
        for f in ("dfx.json", "trace.json"):
            if not os.path.isfile(os.path.join(d, h["dir"], f)):
                fail("%s: %s/%s is missing" % (who, h["dir"], f))
    return {h["host"]: h for h in hs}


def check_trace(d, hosts, chips, coll, info):
    t = load(os.path.join(d, "trace.json"))
    ev = t["traceEvents"]
    if t.get("otherData", {}).get("level") != 4:
        fail("trace.json: otherData level %r" % t.get("otherData", {}).get("level"))
    names = {e["pid"]: e["args"]["name"] for e in ev if e.get("name") == "process_name"}
    want = {}
    for h in range(hosts):
        prefix = "host %d (%s): " % (h, info[h]["host_id"])
        want[PIDS * h] = prefix + "host (L3"
        for c in range(chips):
            want[PIDS * h + c + 1] = prefix + "chip %d (pid " % c
    for pid, start in want.items():
        if not names.get(pid, "").startswith(start):
            fail("trace.json: process %d is %r, expected %r..." % (pid, names.get(pid), start))
    if set(names) != set(want):
        fail("trace.json: processes %r, expected %r" % (sorted(names), sorted(want)))
    comm = [e for e in ev if e.get("cat") == "comm" and e.get("ph") == "X"]
    for e in comm:
        a = e["args"]
        if a.get("host") != e["pid"] // PIDS or "peer" not in a or not a.get("transport"):
            fail("trace.json: comm span %r on pid %d lacks its host, peer or transport"
                 % (e, e["pid"]))
    if {e["pid"] // PIDS for e in comm} != set(range(hosts)):
        fail("trace.json: comm spans only on hosts %r" % sorted({e["pid"] // PIDS
                                                                for e in comm}))
    spans = {}
    for e in comm:
        if e["name"] == coll:
            spans.setdefault(e["pid"], []).append(e)
    if sorted(spans) != sorted(p for p in want if p % PIDS != 0):
        fail("trace.json: %s spans on processes %r, expected every chip" % (coll, sorted(spans)))
    tol = 2 * max(h["clock_uncertainty_us"] for h in info.values()) + 1.0
    n = min(len(v) for v in spans.values())
    for i in range(n):
        nth = [v[i] for v in spans.values()]
        last_start = max(e["ts"] for e in nth)
        first_end = min(e["ts"] + e["dur"] for e in nth)
        if last_start > first_end + tol:
            fail("trace.json: %s number %d does not overlap across ranks after the clock "
                 "alignment: the last starts at %.3f us, the first ends at %.3f us (%s)"
                 % (coll, i, last_start, first_end,
                    ", ".join("pid %d %.3f+%.3f" % (e["pid"], e["ts"], e["dur"]) for e in nth)))
    return names


def check_report(d, names, kernel):
    data = report_data(d)
    got = {int(pid): name for pid, name in data["processes"].items()}
    if got != names:
        fail("report.html: groups %r, expected the trace's processes %r" % (got, names))
    hosts = data.get("hosts", [])
    if [(h["host"], h["pid_base"]) for h in hosts] != [(h, PIDS * h) for h in
                                                       range(len(hosts))] or \
            {n.split(":")[0] for n in names.values()} != {h["name"] for h in hosts}:
        fail("report.html: host groups %r do not match the processes' hosts %r"
             % (hosts, sorted({n.split(":")[0] for n in names.values()})))
    if kernel is None:
        return
    by_id = {t["id"]: t for t in data["tasks"]}
    path = [by_id[i] for i in data["critical_path"]["tasks"]]
    desc = ", ".join("%s@%d" % (t["kernel"], t["pid"]) for t in path)
    if len(path) < 2 or path[0]["pid"] % PIDS != 0 or \
            not any(t["pid"] % PIDS != 0 and t["kernel"] == kernel for t in path):
        fail("report.html: the critical path (%s) does not run from a host task into a chip's "
             "%s task" % (desc, kernel))


def check_dead_domains(who: str, x: dict, hosts: int, chips: int, dead: tuple,
                       in_kernel: bool) -> None:
    """Checks the domains of dfx.json level x (who names it) after chip dead[1] of host
    dead[0] died and a shrink excluded it (in_kernel: the members' kernels shrank the first
    domain first, which its kernel_generations say)."""
    everyone = [{"host": h, "chip": c} for h in range(hosts) for c in range(chips)]
    alive = [m for m in everyone if (m["host"], m["chip"]) != dead]
    doms = {d["id"]: d for d in x.get("domains", [])}
    shrunk = [d for d in doms.values() if d.get("from") is not None]
    if len(shrunk) != 1:
        fail("%s: %d domains made by a shrink, expected 1: %r" % (who, len(shrunk),
                                                                  list(doms.values())))
    nd = shrunk[0]
    old = doms.get(nd["from"])
    if nd["members"] != alive or old is None or old["members"] != everyone:
        fail("%s: the shrunk domain's members %r (from %r), expected %r from %r"
             % (who, nd["members"], old and old["members"], alive, everyone))
    ex = nd.get("excluded", [])
    rank = dead[0] * chips + dead[1]
    if len(ex) != 1 or {k: ex[0].get(k) for k in ("rank", "host", "chip")} != \
            {"rank": rank, "host": dead[0], "chip": dead[1]} or \
            "died" not in ex[0].get("why", ""):
        fail("%s: the shrink's excluded %r, expected rank %d, chip %d of host %d, with why"
             % (who, ex, rank, dead[1], dead[0]))
    if not in_kernel:
        return
    kg = old.get("kernel_generations", [])
    kex = kg[0].get("excluded", []) if len(kg) == 1 else []
    if len(kg) != 1 or kg[0].get("generation") != 1 or kg[0].get("members") != alive or \
            len(kex) != 1 or {k: kex[0].get(k) for k in ("rank", "host", "chip")} != \
            {"rank": rank, "host": dead[0], "chip": dead[1]} or \
            "died" not in kex[0].get("why", ""):
        fail("%s: the first domain's kernel_generations %r, expected generation 1 of %r "
             "excluding rank %d, chip %d of host %d, with why"
             % (who, kg, alive, rank, dead[1], dead[0]))


def check_dead_trace(d: str, hosts: int, chips: int, dead: tuple, kernel: str,
                     steps: int) -> None:
    """Checks that every survivor's track of the merged trace shows the death, the shrink
    and then the survivors' steps."""
    ev = load(os.path.join(d, "trace.json"))["traceEvents"]
    names = {e["pid"]: e["args"]["name"] for e in ev if e.get("name") == "process_name"}
    gone = PIDS * dead[0] + dead[1] + 1
    if gone in names:
        fail("trace.json: the dead chip has a process: %r" % names[gone])
    rank = dead[0] * chips + dead[1]
    for h in range(hosts):
        for c in range(chips):
            pid = PIDS * h + c + 1
            if (h, c) == dead:
                continue
            who = "trace.json: chip %d of host %d (pid %d)" % (c, h, pid)
            if pid not in names:
                fail("%s: no process" % who)
            mine = [e for e in ev if e["pid"] == pid and e.get("ph") == "X"]
            by = {n: [e for e in mine if e["name"] == n]
                  for n in ("comm.revoke", "comm.agree", "comm.shrink")}
            if any(len(v) != 1 for v in by.values()):
                fail("%s: revoke, agree and shrink slices %r, expected one each"
                     % (who, {n: len(v) for n, v in by.items()}))
            ex = by["comm.agree"][0]["args"].get("excluded", [])
            if len(ex) != 1 or (ex[0].get("rank"), ex[0].get("host"), ex[0].get("chip")) != \
                    (rank, dead[0], dead[1]) or "died" not in ex[0].get("why", ""):
                fail("%s: the agreement excluded %r, expected rank %d (chip %d of host %d) "
                     "with why" % (who, ex, rank, dead[1], dead[0]))
            sh = by["comm.shrink"][0]
            if sh["args"].get("survivors") != hosts * chips - 1:
                fail("%s: the shrink's args %r" % (who, sh["args"]))
            end = sh["ts"] + sh["dur"]
            after = [e for e in mine if e.get("cat") == "task" and e["name"] == kernel and
                     e["ts"] >= end]
            if len(after) != steps:
                fail("%s: %d %s tasks after the shrink (ends at %.3f us), expected %d"
                     % (who, len(after), kernel, end, steps))


def check_dead(d: str, hosts: int, chips: int, dead: tuple, kernel: str, steps: int) -> None:
    """The second form (see the module's docstring)."""
    x = load(os.path.join(d, "dfx.json"))
    if x.get("level") != 4 or x.get("hosts_missing") != []:
        fail("dfx.json: level %r, hosts_missing %r" % (x.get("level"), x.get("hosts_missing")))
    hs = x.get("hosts", [])
    if [h.get("host") for h in hs] != list(range(hosts)):
        fail("dfx.json: hosts %r, expected 0..%d" % ([h.get("host") for h in hs], hosts - 1))
    in_kernel = steps == 0
    check_dead_domains("dfx.json", x, hosts, chips, dead, in_kernel)
    for h in hs:
        want = [dead[1]] if h["host"] == dead[0] else []
        if h.get("chips_missing") != want:
            fail("dfx.json host %d: chips_missing %r, expected %r" % (h["host"],
                                                                       h.get("chips_missing"),
                                                                       want))
        check_dead_domains("dfx.json host %d" % h["host"], h, hosts, chips, dead, in_kernel)
    check_dead_trace(d, hosts, chips, dead, kernel, steps)


def main(argv):
    if len(argv) == 8 and argv[1] == "dead":
        dead = tuple(int(v) for v in argv[5].split(":"))
        check_dead(argv[2], int(argv[3]), int(argv[4]), dead, argv[6], int(argv[7]))
        print("PASS")
        return 0
    if len(argv) not in (5, 6):
        print(__doc__)
        return 2
    d, hosts, chips, coll = argv[1], int(argv[2]), int(argv[3]), argv[4]
    info = check_dfx(d, hosts, chips)
    names = check_trace(d, hosts, chips, coll, info)
    check_report(d, names, argv[5] if len(argv) == 6 else None)
    print("PASS")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
