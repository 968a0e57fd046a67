#!/usr/bin/python3
"""Runs the suite of `make test` N times and says which tests failed and which are slow.

`make test-repeat [N=5] [LOAD=1]` calls this after the build. Each run is the same ctest
command as `make test` (everything but the `setup` label, two at a time) with a JUnit report
per run. LOAD=1 starts one busy process per CPU for the whole repeat and stops them at the
end, also when a run fails or the repeat is interrupted. The summary prints, for every test
that failed at least once, its pass count and the first failure's message, then the ten
slowest tests with their median times. Exit status 0 only when every run passed.
"""

import argparse
import os
import signal
import statistics
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from typing import Dict, List, Optional


def start_load(cpus: int) -> List[subprocess.Popen]:
    """Starts one busy shell loop per CPU; returns the processes."""
    return [subprocess.Popen(["sh", "-c", "while :; do :; done"]) for _ in range(cpus)]


def stop_load(procs: List[subprocess.Popen]) -> None:
    """Stops and reaps the busy processes (bounded: 5 s, then SIGKILL)."""
    for p in procs:
        p.terminate()
    for p in procs:
        try:
            p.wait(timeout=5)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()


def first_message(text: str) -> str:
    """The line of a test's output that best says why it failed (else its last line)."""
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    for key in ("FAIL", "ERROR", "Failure", "error", "Timeout", "not found"):
        for ln in lines:
            if key in ln:
                return ln[:300]
    return lines[-1][:300] if lines else "(no output)"


def run_once(build: str, i: int, ctest_args: List[str]) -> Dict[str, dict]:
    """One ctest run; returns {test: {"ok": bool, "time": s, "msg": str}}."""
    junit = os.path.abspath(os.path.join(build, "test-repeat-%d.xml" % i))
    if os.path.exists(junit):
        os.remove(junit)
    cmd = ["ctest", "-j", "2", "-LE", "^setup$", "--output-junit", junit] + ctest_args
    t0 = time.monotonic()
    proc = subprocess.run(cmd, cwd=build, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          text=True, errors="replace")
    took = time.monotonic() - t0
    results: Dict[str, dict] = {}
    if os.path.exists(junit):
        for tc in ET.parse(junit).getroot().iter("testcase"):
            status = tc.get("status", "run")
            failed = tc.find("failure") is not None or tc.find("error") is not None
            ok = status in ("run", "skipped", "disabled") and not failed
            msg = ""
            if not ok:
                out = tc.find("system-out")
                fail = tc.find("failure")
                text = (out.text if out is not None and out.text else "")
                if fail is not None and fail.get("message"):
                    text += "\n" + fail.get("message")
                msg = first_message(text)
            results[tc.get("name")] = {"ok": ok, "time": float(tc.get("time", "0")),
                                       "msg": msg}
    bad = [t for t, r in results.items() if not r["ok"]]
    if not results:
        bad = ["(ctest wrote no report: exit status %d)" % proc.returncode]
        sys.stdout.write(proc.stdout[-4000:])
    print("run %d: %d tests, %d failed, %.0f s%s" % (i, len(results), len(bad), took,
          (": " + ", ".join(bad)) if bad else ""), flush=True)
    return results


def summary(runs: List[Dict[str, dict]], n: int) -> int:
    """Prints the failures and the slowest tests; returns the exit status."""
    names = sorted({t for r in runs for t in r})
    failed = 0
    print("\n== tests that failed at least once (passes of %d runs, first failure)" % len(runs))
    if len(runs) < n:
        print("  only %d of the %d runs finished" % (len(runs), n))
    for t in names:
        seen = [r[t] for r in runs if t in r]
        passes = sum(1 for s in seen if s["ok"])
        if passes < len(runs):
            failed += 1
            first = next((s["msg"] for s in seen if not s["ok"]), "missing from a run")
            print("  %-45s %d/%d  %s" % (t, passes, len(runs), first))
    if len(runs) < n or any(len(r) == 0 for r in runs):
        failed += 1
    if failed == 0:
        print("  none: %d of %d runs green" % (len(runs), n))
    med = {t: statistics.median([r[t]["time"] for r in runs if t in r]) for t in names}
    print("\n== the ten slowest tests (median of %d runs)" % len(runs))
    for t in sorted(med, key=med.get, reverse=True)[:10]:
        print("  %8.2f s  %s" % (med[t], t))
    return 1 if failed else 0


def main() -> int:
    """Parses the arguments, runs the repeats under the optional load, prints the summary."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--build", default="build", help="the build folder (default build)")
    ap.add_argument("-n", type=int, default=5, help="full runs (default 5)")
    ap.add_argument("--load", type=int, default=0,
                    help="1: one busy process per CPU for the whole repeat")
    ap.add_argument("ctest_args", nargs="*", help="more ctest arguments (e.g. -R regex)")
    a = ap.parse_args()
    if a.n < 1:
        ap.error("N must be at least 1")
    load: List[subprocess.Popen] = []

    def stop(signo: int, frame: Optional[object]) -> None:
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, stop)
    runs: List[Dict[str, dict]] = []
    try:
        if a.load:
            load = start_load(os.cpu_count() or 1)
            print("load: %d busy processes (one per CPU) for the whole repeat" % len(load))
        for i in range(1, a.n + 1):
            runs.append(run_once(a.build, i, a.ctest_args))
    except KeyboardInterrupt:
        print("interrupted after %d runs" % len(runs))
    finally:
        stop_load(load)
    return summary(runs, a.n) if runs else 1


if __name__ == "__main__":
    sys.exit(main())
