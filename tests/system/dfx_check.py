#!/usr/bin/env python3
"""dfx_check.py - checks a DFX output directory with Python's own JSON parser.

usage: dfx_check.py DIR TASKS EDGES [WALL_US]
       dfx_check.py --dom DOM_FILE TASKS [ZOOM GROUPS]

The first form checks every file the collectors wrote (those present; trace.json, deps.json,
report.html and dfx.json must be there): it parses them, counts tasks and edges against the
expected numbers (worked out by hand by the caller), and checks that slices are non-negative
and, given WALL_US, inside the run. The second form checks a DOM dumped by headless Chromium
from report.html: one element with a data-task attribute per task; with ZOOM and GROUPS (the
page was opened as report.html#zoom=ZOOM) also the interactive report: the zoom buttons, the
view the address asked for (data-zoom, the view's start and end: from the first task start,
the span from it to the last task end over ZOOM), the time axis (its labels at the view's ends,
every task inside the view drawn between them), a tooltip
per task (its <title>: id, kernel, core, start, duration and the tasks it depends on, which
must be its edges' producers), one utilisation row per track with tasks, the critical path
highlighted (one rect of class cp per task on it, and a line through as many points) and
GROUPS groups of rows (one per process: a chip, or at level 3 the host and each chip).
Prints PASS or FAIL: <reason>; exit status 0 or 1.
"""
import html.parser
import csv
from decimal import Decimal
import json
import os
import re
import sys


def fail(msg):
    print("FAIL: " + msg)
    sys.exit(1)


def load(path):
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except (OSError, ValueError) as e:
        fail("%s: %s" % (path, e))


def check_trace(d, tasks, edges, wall_us):
    t = load(os.path.join(d, "trace.json"))
    if t.get("otherData", {}).get("version") != 1:
        fail("trace.json: otherData.version is not 1")
    slices, starts, ends = {}, {}, {}
    for e in t["traceEvents"]:
        ph = e["ph"]
        if ph == "X":
            if e["ts"] < 0 or e["dur"] < 0:
                fail("trace.json: negative time in %r" % e)
            if wall_us is not None and e["ts"] + e["dur"] > wall_us + 1.0:
                fail("trace.json: %s ends at %.3f us, after the run (%.3f us)"
                     % (e["name"], e["ts"] + e["dur"], wall_us))
            if e.get("cat") == "task":
                slices[e["args"]["task"]] = e
        elif ph in ("s", "f"):
            (starts if ph == "s" else ends)[e["id"]] = e
    if set(slices) != set(range(tasks)):
        fail("trace.json: task ids %s, expected 0..%d" % (sorted(slices)[:10], tasks - 1))
    pairs = {k: (e["args"]["from"], e["args"]["to"]) for k, e in starts.items()}
    if len(starts) != edges or pairs != {k: (e["args"]["from"], e["args"]["to"])
                                         for k, e in ends.items()}:
        fail("trace.json: %d flow starts, %d flow ends, expected %d pairs"
             % (len(starts), len(ends), edges))
    for k, (p, c) in pairs.items():
        sp, sc, fs, fe = slices[p], slices[c], starts[k], ends[k]
        # a flow binds to the slice enclosing it on its own track: the producer's (just
        # before its end) and the consumer's (at its start)
        if fs["tid"] != sp["tid"] or not sp["ts"] <= fs["ts"] <= sp["ts"] + sp["dur"]:
            fail("trace.json: flow %d starts outside task %d's slice" % (k, p))
        if fe["tid"] != sc["tid"] or fe["ts"] != sc["ts"]:
            fail("trace.json: flow %d does not end at task %d's start" % (k, c))
    return set(pairs.values())


def check_deps(d, tasks, edges):
    j = load(os.path.join(d, "deps.json"))
    if j.get("version") != 1:
        fail("deps.json: version is not 1")
    if [t["id"] for t in j["tasks"]] != list(range(tasks)):
        fail("deps.json: task ids are not 0..%d" % (tasks - 1))
    pairs = [tuple(e) for e in j["edges"]]
    if len(pairs) != edges or len(set(pairs)) != edges or any(p >= c for p, c in pairs):
        fail("deps.json: %d edges (expected %d distinct, producer < consumer)"
             % (len(pairs), edges))
    with open(os.path.join(d, "deps.dot"), encoding="utf-8") as f:
        dot = f.read()
    if not dot.startswith("// plexus deps.dot version 1") or dot.count("->") != edges:
        fail("deps.dot: %d edges, expected %d" % (dot.count("->"), edges))
    return set(pairs)


def check_args(d, tasks):
    j = load(os.path.join(d, "args", "args_dump.json"))
    if j.get("version") != 1 or len(j["tasks"]) != tasks:
        fail("args_dump.json: version %r, %d tasks (expected %d)"
             % (j.get("version"), len(j["tasks"]), tasks))
    total = sum(x["bytes"] for t in j["tasks"] for a in t["args"] for x in a.get("data", []))
    size = os.path.getsize(os.path.join(d, "args", "args.bin"))
    if total != size:
        fail("args.bin has %d bytes, args_dump.json accounts for %d" % (size, total))


def check_pmu(d, tasks):
    with open(os.path.join(d, "pmu.csv"), encoding="utf-8") as f:
        lines = f.read().splitlines()
    if lines[0] != "# plexus pmu.csv version 1" or not lines[1].startswith("# counters: "):
        fail("pmu.csv: bad comment lines %r" % lines[:2])
    rows = list(csv.reader(lines[2:]))
    if rows[0][:2] != ["task", "core"] or len(rows[0]) != 6 or len(rows) != 1 + tasks:
        fail("pmu.csv: header %r and %d rows, expected 6 columns and %d rows"
             % (rows[0], len(rows) - 1, tasks))


def check_scopes(d):
    with open(os.path.join(d, "scope_stats.jsonl"), encoding="utf-8") as f:
        lines = [json.loads(x) for x in f.read().splitlines()]
    if lines[0].get("version") != 1 or lines[0].get("events") != len(lines) - 1:
        fail("scope_stats.jsonl: bad header %r" % lines[0])


def check_report(d, tasks):
    with open(os.path.join(d, "report.html"), encoding="utf-8") as f:
        html = f.read()
    m = re.search(r'<script type="application/json" id="plexus-data">(.*?)</script>', html,
                  re.S)
    if m is None:
        fail("report.html: no plexus-data element")
    data = json.loads(m.group(1))
    if sorted(t["id"] for t in data["tasks"]) != list(range(tasks)):
        fail("report.html: its data lists %d tasks, expected %d" % (len(data["tasks"]), tasks))
    # url(#id) names an element of the page itself (the timeline's clip path)
    if re.search(r"<(link|img|iframe)\b|\bsrc=|@import|url\((?!#)", html):
        fail("report.html loads something from outside")


def check_dfx(d):
    j = load(os.path.join(d, "dfx.json"))
    if j.get("version") != 1:
        fail("dfx.json: version is not 1")
    for name, c in j["collectors"].items():
        if c["collected"] + c["dropped"] != c["produced"]:
            fail("dfx.json: %s collected %d + dropped %d != produced %d"
                 % (name, c["collected"], c["dropped"], c["produced"]))


class DomTree(html.parser.HTMLParser):
    """The elements of a dumped DOM: (tag, attrs, text of its direct <title> child)."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.elems, self.stack, self.data = [], [], None

    def handle_starttag(self, tag, attrs):
        e = {"tag": tag, "attrs": dict(attrs), "title": None, "text": ""}
        self.elems.append(e)
        if tag not in ("br", "meta", "input"):
            self.stack.append(e)

    def handle_endtag(self, tag):
        while self.stack:
            e = self.stack.pop()
            if e["tag"] == "title" and self.stack:
                self.stack[-1]["title"] = e["text"]
            if e["tag"] == tag:
                break

    def handle_data(self, data):
        for e in self.stack[-1:]:
            e["text"] += data


def check_axis(t, tl, timed):
    """The time axis: its two labels ("N.NNN us") name the view's ends and sit at them (the
    start label starts at the lanes' left edge, the end label ends at their right edge), and
    every rect of a task inside the view lies between the two labels' x, in exact decimals
    (the coordinates as the page wrote them)."""
    labels = [e for e in t.elems if e["tag"] == "text" and re.fullmatch(r"-?\d+\.\d{3} us",
                                                                        e["text"].strip())]
    if len(labels) != 2:
        fail("the timeline has %d axis labels (text 'N.NNN us'), expected 2" % len(labels))
    a0, a1 = labels
    v0, v1 = tl["data-view-start-us"], tl["data-view-end-us"]
    if a0["text"].strip() != v0 + " us" or a1["text"].strip() != v1 + " us":
        fail("the axis labels read %r and %r, the view is %s..%s us"
             % (a0["text"], a1["text"], v0, v1))
    if a0["attrs"].get("text-anchor", "start") != "start" or \
            a1["attrs"].get("text-anchor", "start") != "end":
        fail("the end label is anchored at its %s, so it does not end at the axis's end"
             % a1["attrs"].get("text-anchor", "start"))
    x0, x1 = Decimal(a0["attrs"]["x"]), Decimal(a1["attrs"]["x"])
    inside = {x["id"] for x in timed
              if float(v0) <= x["ts_us"] and x["ts_us"] + x["dur_us"] <= float(v1)}
    for e in t.elems:
        if e["tag"] != "rect" or int(e["attrs"].get("data-task", -1)) not in inside:
            continue
        x, w = Decimal(e["attrs"]["x"]), Decimal(e["attrs"]["width"])
        if x < x0 or x + w > x1:
            fail("task %s is drawn from x %s to %s, outside the axis labels at %s..%s"
                 % (e["attrs"]["data-task"], x, x + w, x0, x1))


def check_dom_report(dom, zoom, groups):
    """The interactive report's DOM (see the usage text)."""
    t = DomTree()
    t.feed(dom)
    by_id = {e["attrs"].get("id"): e for e in t.elems if "id" in e["attrs"]}
    data = json.loads(by_id["plexus-data"]["text"])
    for b in ("zoom-in", "zoom-out", "zoom-reset"):
        if by_id.get(b, {}).get("tag") != "button":
            fail("the report has no %s button" % b)
    tl = by_id.get("timeline", {"attrs": {}})["attrs"]
    timed = [x for x in data["tasks"] if x["ts_us"] is not None]
    # the axis runs from the first start to the last end of what is drawn
    first = min(x["ts_us"] for x in timed)
    last = max(x["ts_us"] + x["dur_us"] for x in timed)
    want0, want1 = first, first + (last - first) / zoom
    if abs(float(tl.get("data-zoom", "nan")) - zoom) > 1e-3:
        fail("the timeline's zoom is %s, the address asked for %g" % (tl.get("data-zoom"), zoom))
    if abs(float(tl["data-view-start-us"]) - want0) > 1e-3 or \
            abs(float(tl["data-view-end-us"]) - want1) > 2e-3:
        fail("the view is %s..%s us, expected %.3f..%.3f (the first start, then the span / "
             "zoom)" % (tl["data-view-start-us"], tl["data-view-end-us"], want0, want1))
    check_axis(t, tl, timed)
    deps = {}
    for p, c in data["edges"]:
        deps.setdefault(c, []).append(p)
    rects = [e for e in t.elems if e["tag"] == "rect" and "data-task" in e["attrs"]]
    if len(rects) != len(timed):
        fail("%d task rects for %d timed tasks" % (len(rects), len(timed)))
    tasks = {x["id"]: x for x in data["tasks"]}
    for r in rects:
        i = int(r["attrs"]["data-task"])
        want = sorted(deps.get(i, []))
        got = sorted(int(v) for v in r["attrs"].get("data-deps", "").split())
        title = r["title"] or ""
        for word in ("task %d %s" % (i, tasks[i]["kernel"]), "core %d" % tasks[i]["core"],
                     "start ", "duration ", "depends on: "):
            if word not in title:
                fail("task %d's tooltip %r lacks %r" % (i, title, word))
        if got != want or ("depends on: " + (", ".join(map(str, want)) or "none")) not in title:
            fail("task %d: the report says it depends on %s, its edges say %s" % (i, got, want))
    tracks = {(x["pid"], x["tid"]) for x in timed}
    rows = [e for e in t.elems if e["tag"] == "tr" and "data-track" in e["attrs"]]
    if len(rows) != len(tracks):
        fail("%d utilisation rows for %d tracks with tasks" % (len(rows), len(tracks)))
    cp = data["critical_path"]["tasks"]
    hi = [r for r in rects if "cp" in r["attrs"].get("class", "").split()]
    if sorted(int(r["attrs"]["data-task"]) for r in hi) != sorted(cp):
        fail("the highlighted rects %s are not the critical path %s"
             % ([r["attrs"]["data-task"] for r in hi], cp))
    if len(by_id.get("cp-line", {"attrs": {}})["attrs"].get("points", "").split()) != len(cp):
        fail("the critical path's line does not pass through its %d tasks" % len(cp))
    g = [e for e in t.elems if e["tag"] == "g" and "chip-group" in e["attrs"].get("class", "")]
    if len(g) != groups:
        fail("the timeline has %d groups of rows, expected %d (one per process)" % (len(g), groups))


def main(argv):
    if len(argv) in (4, 6) and argv[1] == "--dom":
        with open(argv[2], encoding="utf-8", errors="replace") as f:
            dom = f.read()
        n = len(re.findall(r"\sdata-task=\"\d+\"", dom))
        if n != int(argv[3]):
            fail("the rendered DOM has %d elements with data-task, expected %s" % (n, argv[3]))
        if len(argv) == 6:
            check_dom_report(dom, float(argv[4]), int(argv[5]))
        print("PASS")
        return
    if len(argv) not in (4, 5):
        fail(__doc__.splitlines()[2])
    d, tasks, edges = argv[1], int(argv[2]), int(argv[3])
    wall_us = float(argv[4]) if len(argv) == 5 else None
    flows = check_trace(d, tasks, edges, wall_us)
    if check_deps(d, tasks, edges) != flows:
        fail("the edges of deps.json and the flows of trace.json differ")
    check_report(d, tasks)
    check_dfx(d)
    if os.path.exists(os.path.join(d, "args")):
        check_args(d, tasks)
    if os.path.exists(os.path.join(d, "pmu.csv")):
        check_pmu(d, tasks)
    if os.path.exists(os.path.join(d, "scope_stats.jsonl")):
        check_scopes(d)
    print("PASS")


if __name__ == "__main__":
    main(sys.argv)
