#!/usr/bin/env python3
"""dfx_l3_check.py - checks the merged DFX outputs of a level-3 multi_chip run.

usage: dfx_l3_check.py DIR CHIPS HOST_TASKS CHIP_TASKS FLOWS
       dfx_l3_check.py domains DIR NAME CHIPS PROFILE
       dfx_l3_check.py report DIR CHIPS KERNEL
       dfx_l3_check.py missing DIR CHIPS DEAD

DIR holds the outputs of `plexus run multi_chip --chips CHIPS --dfx ... --out DIR` (swimlane
on). Counts are worked out by hand by the caller: HOST_TASKS task slices on the host (CHIPS
next-level tasks + 1 host task), CHIP_TASKS on each chip (mc.fma and mc.sum), FLOWS
dependency arrows in all (the host's CHIPS edges + 1 per chip). Checks, with Python's own JSON
parser: trace.json has one process per chip named "chip i (pid P)" (P from dfx.json) plus the
host's, the task slices per process, flow ids unique across processes (each a start and an
end on one process), and every chip's tasks between the host's dispatch of its call (task i
goes to chip i in multi_chip) and the host task; dfx.json lists every chip with a transport
per collector, counts that add up, reconciled true, and no domains (multi_chip makes none).

The second form checks the "domains" of a communication example's run on CHIPS chips under
device profile PROFILE: one domain NAME with members 0..CHIPS-1, and for every pair of ranks
a < b its transport and why as the profile's documented facts give them (default and host64k
map every peer: direct; a2a3-pcie and minimal none: staged; pairs only inside 0-1, 2-3, ...),
and the domain's own "transport" (the one all pairs use, or "mixed") and "why".
The third form checks the critical path of the merged report.html of a run on CHIPS chips
(see check_report_cp): it must go from the host's tasks into the chips' tasks they ran and
reach a KERNEL task on a chip.
The fourth form checks the outputs of a run on CHIPS chips after chip DEAD died (train_loop
--kill-chip DEAD with --dfx): dfx.json names DEAD in chips_missing, its entry has the error
("died") and no collectors, every other chip's collectors reconcile, "reconciled" is false;
trace.json has the host's and every survivor's process and none for DEAD, and task slices on
each survivor.
Prints PASS or FAIL: <reason>.
"""
import json
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from dfx_check import fail, load  # noqa: E402  (shared with the single-chip checker)

TRANSPORTS = ("mapped", "mapped_huge", "shadow")


def check_collectors(who, colls):
    if not colls:
        fail("dfx.json: %s lists no collectors" % who)
    for name, c in colls.items():
        if c["transport"] not in TRANSPORTS:
            fail("dfx.json: %s %s has transport %r" % (who, name, c["transport"]))
        if c["collected"] + c["dropped"] != c["produced"] or c["reconciled"] is not True:
            fail("dfx.json: %s %s does not reconcile: %r" % (who, name, c))


def check_dfx(d, chips):
    j = load(os.path.join(d, "dfx.json"))
    if j.get("version") != 1 or j.get("level") != 3 or j.get("reconciled") is not True:
        fail("dfx.json: version %r, level %r, reconciled %r"
             % (j.get("version"), j.get("level"), j.get("reconciled")))
    check_collectors("the host", j["collectors"])
    if [c["chip"] for c in j["chips"]] != list(range(chips)):
        fail("dfx.json: chips %r, expected 0..%d" % ([c["chip"] for c in j["chips"]], chips - 1))
    for c in j["chips"]:
        if "error" in c or not isinstance(c["pid"], int) or c["pid"] <= 0:
            fail("dfx.json: chip entry %r" % c)
        check_collectors("chip %d" % c["chip"], c["collectors"])
    if j.get("domains") != []:
        fail("dfx.json: domains %r, expected [] (multi_chip allocates none)" % j.get("domains"))
    return {c["chip"]: c["pid"] for c in j["chips"]}


GROUP_WHY = ("peer_map_group=2 in profile pairs: chips map each other only inside groups of 2 "
             "(0-1, 2-3, ...)")


def expected_pair(profile, ca, cb):
    """The transport and why of chips ca and cb under profile, from its documented facts."""
    if profile in ("default", "host64k"):
        return "direct", "peer_map=1 in profile %s" % profile
    if profile in ("a2a3-pcie", "minimal"):
        return "staged", "peer_map=0 in profile %s" % profile
    if profile == "pairs":
        if ca // 2 == cb // 2:
            return "direct", "peer_map=1 in profile pairs"
        return "staged", GROUP_WHY
    fail("dfx_l3_check.py: no expectations for profile %r" % profile)


def check_domains(d, name, chips, profile):
    j = load(os.path.join(d, "dfx.json"))
    doms = [x for x in j.get("domains", []) if x["name"] == name]
    if len(doms) != 1 or doms[0]["members"] != list(range(chips)):
        fail("dfx.json: domains %r, expected one %r on chips 0..%d" % (j.get("domains"), name,
                                                                       chips - 1))
    dom = doms[0]
    want = []
    for a in range(chips):
        for b in range(a + 1, chips):
            t, why = expected_pair(profile, a, b)
            want.append({"a": a, "b": b, "transport": t, "why": why})
    if dom["pairs"] != want:
        fail("dfx.json: domain %s pairs %r, expected %r" % (name, dom["pairs"], want))
    kinds = {p["transport"] for p in want}
    whys = {p["why"] for p in want}
    t = "direct" if not want else kinds.pop() if len(kinds) == 1 else "mixed"
    why = ("one rank: no peer to reach" if not want else whys.pop() if len(whys) == 1
           else 'the pairs differ: see "pairs"')
    if dom["transport"] != t or dom["why"] != why:
        fail("dfx.json: domain %s transport %r why %r, expected %r %r"
             % (name, dom["transport"], dom["why"], t, why))
    print("PASS")


def processes(events):
    names = {}
    for e in events:
        if e["ph"] == "M" and e["name"] == "process_name":
            if e["pid"] in names:
                fail("trace.json: two process names for pid %d" % e["pid"])
            names[e["pid"]] = e["args"]["name"]
    return names


def check_flows(events, flows):
    ends = {}
    for e in events:
        if e["ph"] in ("s", "f"):
            ends.setdefault(e["id"], []).append((e["ph"], e["pid"]))
    if len(ends) != flows:
        fail("trace.json: %d flow ids, expected %d" % (len(ends), flows))
    for k, v in ends.items():
        if sorted(p for p, _ in v) != ["f", "s"] or v[0][1] != v[1][1]:
            fail("trace.json: flow id %r has %r (one start and one end on one process)" % (k, v))


def check_times(events, chips):
    def one(pred):
        found = [e for e in events if e["ph"] == "X" and pred(e)]
        if len(found) != 1:
            fail("trace.json: %d slices where one was expected" % len(found))
        return found[0]

    host = one(lambda e: e["pid"] == 0 and e["name"] == "l3.host")
    for i in range(chips):
        disp = one(lambda e: e["pid"] == 0 and e["name"] == "l3.dispatch" and
                   e["args"].get("task") == i)
        tasks = [e for e in events if e["ph"] == "X" and e["pid"] == i + 1 and
                 e.get("cat") == "task"]
        lo = min(e["ts"] for e in tasks)
        hi = max(e["ts"] + e["dur"] for e in tasks)
        if not disp["ts"] <= lo <= hi <= host["ts"]:
            fail("trace.json: chip %d's tasks [%.3f, %.3f] us are not between the host's "
                 "dispatch (%.3f us) and the host task (%.3f us): time bases differ"
                 % (i, lo, hi, disp["ts"], host["ts"]))


def report_data(d):
    with open(os.path.join(d, "report.html"), encoding="utf-8") as f:
        m = re.search(r'<script type="application/json" id="plexus-data">(.*?)</script>',
                      f.read(), re.S)
    if m is None:
        fail("report.html: no plexus-data element")
    return json.loads(m.group(1))


def check_report_cp(d, chips, kernel):
    """The merged report's critical path follows the host's edges through each host task
    into the chip tasks its calls ran: more than one task, host and chip tasks, a KERNEL task
    on a chip among them, consecutive host tasks joined by a host edge, consecutive chip tasks
    of one chip by that chip's edge, each chip task after the host task that precedes it, and
    its length the sum of its tasks' durations."""
    data = report_data(d)
    cp = data["critical_path"]
    by_id = {t["id"]: t for t in data["tasks"]}
    edges = {tuple(e) for e in data["edges"]}
    path = [by_id[i] for i in cp["tasks"]]
    desc = ", ".join("%d %s@%d" % (t["id"], t["kernel"], t["pid"]) for t in path)
    if cp["by"] != "duration" or len(path) < 2:
        fail("report.html: the critical path is %d task(s) (%s), expected a chain through "
             "the host's tasks into the chips' tasks" % (len(path), desc))
    if path[0]["pid"] != 0 or not any(0 < t["pid"] <= chips for t in path) or \
            not any(t["pid"] > 0 and t["kernel"] == kernel for t in path):
        fail("report.html: the critical path (%s) does not start on the host and reach a %s "
             "task on a chip" % (desc, kernel))
    host = None
    for prev, t in zip([None] + path, path):
        if t["pid"] == 0:
            if host is not None and (host["id"], t["id"]) not in edges:
                fail("report.html: critical path %s: no host edge %d -> %d"
                     % (desc, host["id"], t["id"]))
            host = t
        elif prev["pid"] == t["pid"] and (prev["id"], t["id"]) not in edges:
            fail("report.html: critical path %s: no chip edge %d -> %d"
                 % (desc, prev["id"], t["id"]))
        elif t["ts_us"] < host["ts_us"]:
            fail("report.html: critical path %s: chip task %d starts before host task %d"
                 % (desc, t["id"], host["id"]))
    total = sum(t["dur_us"] for t in path)
    if abs(total - cp["length_us"]) > 0.001 * len(path):
        fail("report.html: the critical path's length is %.3f us, its tasks take %.3f us"
             % (cp["length_us"], total))


def check_missing(d, chips, dead):
    j = load(os.path.join(d, "dfx.json"))
    if j.get("level") != 3 or j.get("chips_missing") != [dead] or \
            j.get("reconciled") is not False:
        fail("dfx.json: level %r, chips_missing %r, reconciled %r; expected 3, [%d], false"
             % (j.get("level"), j.get("chips_missing"), j.get("reconciled"), dead))
    if [c["chip"] for c in j["chips"]] != list(range(chips)):
        fail("dfx.json: chips %r" % [c["chip"] for c in j["chips"]])
    for c in j["chips"]:
        if c["chip"] == dead:
            if "died" not in c.get("error", "") or "collectors" in c:
                fail("dfx.json: the dead chip's entry %r" % c)
        else:
            if "error" in c:
                fail("dfx.json: survivor %d has an error: %r" % (c["chip"], c["error"]))
            check_collectors("chip %d" % c["chip"], c["collectors"])
    events = load(os.path.join(d, "trace.json"))["traceEvents"]
    names = processes(events)
    want = [0] + [i + 1 for i in range(chips) if i != dead]
    if sorted(names) != want:
        fail("trace.json: processes %r, expected pids %r" % (names, want))
    for pid in want[1:]:
        if not any(e["ph"] == "X" and e["pid"] == pid and e.get("cat") == "task"
                   for e in events):
            fail("trace.json: no task slices on %s" % names[pid])
    print("PASS")


def main(argv):
    if len(argv) == 5 and argv[1] == "missing":
        check_missing(argv[2], int(argv[3]), int(argv[4]))
        return
    if len(argv) == 6 and argv[1] == "domains":
        check_domains(argv[2], argv[3], int(argv[4]), argv[5])
        return
    if len(argv) == 5 and argv[1] == "report":
        check_report_cp(argv[2], int(argv[3]), argv[4])
        print("PASS")
        return
    if len(argv) != 6:
        fail(__doc__.splitlines()[2])
    d = argv[1]
    chips, host_tasks, chip_tasks, flows = (int(x) for x in argv[2:])
    pids = check_dfx(d, chips)
    t = load(os.path.join(d, "trace.json"))
    events = t["traceEvents"]
    if t["otherData"].get("version") != 1:
        fail("trace.json: otherData.version is not 1")
    want = {0: "host (L3 orchestration + dispatch)"}
    want.update({i + 1: "chip %d (pid %d)" % (i, pids[i]) for i in range(chips)})
    if processes(events) != want:
        fail("trace.json: processes %r, expected %r" % (processes(events), want))
    for pid in want:
        n = sum(1 for e in events if e["ph"] == "X" and e["pid"] == pid and
                e.get("cat") == "task")
        if n != (host_tasks if pid == 0 else chip_tasks):
            fail("trace.json: %d task slices on %s" % (n, want[pid]))
    check_flows(events, flows)
    check_times(events, chips)
    print("PASS")


if __name__ == "__main__":
    main(sys.argv)
