#!/usr/bin/env python3
"""doctor_comm_check.py PLEXUS STAGED_BUILT - checks `plexus doctor --comm --json`.

Runs the doctor under the profiles default (every pair direct), a2a3-pcie (no peer mapping:
staged, else no transport), pairs (direct only inside 0-1, 2-3) and a forced
direct under a2a3-pcie (refused: the error names the force, peer_map=0, the profile and the
alternative), and checks each document against those expectations, worked out from the
profiles' documented facts. STAGED_BUILT is 1 once the staged data path is built.
Exit 0 when every check holds, else 1 with the first failure.
"""
import json
import os
import subprocess
import sys

PLEXUS, STAGED = sys.argv[1], sys.argv[2] == "1"
PAIRS4 = [(0, 1), (0, 2), (0, 3), (1, 2), (1, 3), (2, 3)]


def fail(msg):
    print("FAIL: " + msg)
    sys.exit(1)


def doctor(profile, chips, env=None):
    e = dict(os.environ, PLEXUS_LOG="warn")
    e.pop("PLEXUS_COMM_TRANSPORT", None)
    e.update(env or {})
    p = subprocess.run([PLEXUS, "doctor", "--comm", "--json", "--device-profile", profile,
                        "--chips", str(chips)], env=e, capture_output=True, text=True,
                       timeout=30)
    if p.returncode != 0:
        fail("%s: exit status %d: %s" % (profile, p.returncode, p.stdout + p.stderr))
    d = json.loads(p.stdout)
    if d.get("version") != 1:
        fail("%s: version %r, expected 1" % (profile, d.get("version")))
    c = d["comm"]
    if c["device_profile"] != profile or c["chips"] != chips:
        fail("%s: header %r" % (profile, c))
    if [(q["a"], q["b"]) for q in c["pairs"]] != [p for p in PAIRS4 if p[1] < chips]:
        fail("%s: pairs %r" % (profile, [(q["a"], q["b"]) for q in c["pairs"]]))
    for q in c["pairs"]:
        if [v["transport"] for v in q["verdicts"]] != ["direct", "staged", "mpi"]:
            fail("%s: verdicts %r" % (profile, q["verdicts"]))
        chosen = [v for v in q["verdicts"] if v["transport"] == q["transport"]]
        if q["transport"] is not None and not chosen[0]["accepts"]:
            fail("%s: pair %d-%d uses a transport that refuses: %r" % (profile, q["a"], q["b"], q))
        if (q["transport"] is None) != (q["error"] is not None):
            fail("%s: pair %d-%d: error %r with transport %r" % (profile, q["a"], q["b"],
                                                                 q["error"], q["transport"]))
    return c


def expect(c, a, b, transport, why, direct_why):
    q = [q for q in c["pairs"] if q["a"] == a and q["b"] == b][0]
    if q["transport"] != transport or (why is not None and q["why"] != why):
        fail("%s: pair %d-%d: %r / %r, expected %r / %r" % (c["device_profile"], a, b,
                                                         q["transport"], q["why"], transport, why))
    if q["verdicts"][0]["why"] != direct_why:
        fail("%s: pair %d-%d: direct's why %r, expected %r" % (c["device_profile"], a, b,
                                                            q["verdicts"][0]["why"], direct_why))
    return q


def counts(c, direct, staged, none):
    want = {"direct": direct, "staged": staged, "mpi": 0, "none": none}
    if c["counts"] != want or c["ok"] != (none == 0):
        fail("%s: counts %r ok %r, expected %r" % (c["device_profile"], c["counts"], c["ok"], want))


c = doctor("default", 4)
for a, b in PAIRS4:
    expect(c, a, b, "direct", "peer_map=1 in profile default", "peer_map=1 in profile default")
counts(c, 6, 0, 0)

c = doctor("a2a3-pcie", 4)
for a, b in PAIRS4:
    expect(c, a, b, "staged" if STAGED else None,
           "peer_map=0 in profile a2a3-pcie" if STAGED else "no transport",
           "peer_map=0 in profile a2a3-pcie")
counts(c, 0, 6 if STAGED else 0, 0 if STAGED else 6)

GROUP = ("peer_map_group=2 in profile pairs: chips map each other only inside groups of 2 "
         "(0-1, 2-3, ...)")
c = doctor("pairs", 4)
for a, b in PAIRS4:
    if (a, b) in ((0, 1), (2, 3)):
        expect(c, a, b, "direct", "peer_map=1 in profile pairs", "peer_map=1 in profile pairs")
    else:
        expect(c, a, b, "staged" if STAGED else None, GROUP if STAGED else "no transport", GROUP)
counts(c, 2, 4 if STAGED else 0, 0 if STAGED else 4)

c = doctor("a2a3-pcie", 2, {"PLEXUS_COMM_TRANSPORT": "direct"})
if c["forced"] != "direct":
    fail("forced: %r" % c["forced"])
q = expect(c, 0, 1, None, "no transport", "peer_map=0 in profile a2a3-pcie")
want = ("forced direct (PLEXUS_COMM_TRANSPORT=direct) refused: peer_map=0 in profile a2a3-pcie; "
        "mpi refused (this worker does not run under MPI (not started by an MPI launcher")
if STAGED and "; the alternative: staged would work (" not in q["error"]:
    fail("forced direct: error %r does not name staged as the alternative" % q["error"])
if not q["error"].startswith(want):
    fail("forced direct: error %r, expected it to start with %r" % (q["error"], want))
counts(c, 0, 0, 1)
print("ok: doctor --comm --json under default, a2a3-pcie, pairs and forced direct")
