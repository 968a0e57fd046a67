"""plexus.caps(), plexus.doctor() and DFX output paths."""
import json
import os

import numpy as np
import pytest

import plexus


def test_caps_is_the_probe_as_a_dict():
    c = plexus.caps()
    assert c["host_page_size"]["value"] == os.sysconf("SC_PAGE_SIZE")
    assert c["online_cpus"]["value"] == os.cpu_count()
    assert c["device_profile"]["value"] == "default"
    for f in c.values():
        assert set(f) >= {"value", "source", "note"}


def test_caps_with_a_profile():
    c = plexus.caps(profile="a2a3-pcie")
    assert c["peer_map"]["value"] is False and c["peer_map"]["source"] == "profile"
    with pytest.raises(plexus.InvalidArgument, match="a2a3-pcie"):  # lists valid names
        plexus.caps(profile="nope")


def test_doctor():
    d = plexus.doctor()
    assert {"default", "a2a3-pcie", "host64k", "minimal"} <= set(d["profiles"])
    assert d["facts"]["memfd"]["value"] in (True, False)
    assert "PLEXUS_CORES" in d["config"]
    assert d["python"]["kernel_slots"] == 64


def test_dfx_output_paths(tmp_path):
    out = tmp_path / "dfx"
    with plexus.Worker(cores=2, dfx="all", out=out) as w:
        k = plexus.builtin(w)
        a = np.ones(256, np.float32)
        b = np.zeros(256, np.float32)
        r = w.run(lambda o: [o.submit(k.scale, inputs=[a], outputs=[b], scalars=[2.0])
                             for _ in range(3)])
    assert r.out == str(out)
    for name in ("dfx.json", "trace.json", "deps.json", "deps.dot", "pmu.csv",
                 "scope_stats.jsonl", "report.html"):
        assert r.dfx[name] == os.path.join(str(out), name) and os.path.isfile(r.dfx[name])
    with open(r.dfx["deps.json"]) as f:
        deps = json.load(f)
    assert len(deps["tasks"]) == 3  # three scales (b is used in place: no copy-back)
    assert r.host_arrays["in_place"] == 2
    assert r.stats["dfx_records"] > 0


def test_dfx_names_the_copy_back_of_a_staged_array(tmp_path):
    # the runtime's copy kernel is registered before the first DFX run, so the trace of
    # that run names the copy-back (not "kernel#N"; the package registers a Python-side
    # kernel at its first submit, inside the run, so scale itself is named from the next run)
    out = tmp_path / "staged"
    with plexus.Worker(cores=1, dfx="depgen", out=out, host_arrays="copy") as w:
        k = plexus.builtin(w)
        a = np.ones(64, np.float32)
        b = np.zeros(64, np.float32)
        r = w.run(lambda o: o.submit(k.scale, inputs=[a], outputs=[b], scalars=[2.0]))
    assert b.tolist() == [2.0] * 64
    with open(r.dfx["deps.json"]) as f:
        text = f.read()
    assert '"kernel": "plexus.copy"' in text, text[:400]


def test_dfx_off_has_no_paths(w, k):
    r = w.run(lambda o: None)
    assert r.dfx == {} and r.out is None


def test_dfx_at_level3(tmp_path):
    out = tmp_path / "l3"
    with plexus.Worker(level=3, chips=2, cores=1, dfx="swimlane,depgen", out=out) as w:
        a = np.ones(64, np.float32)
        b = np.zeros(64, np.float32)
        r = w.run(lambda o: o.submit_host(lambda x, y: np.copyto(y, x), inputs=[a],
                                          outputs=[b]))
    assert b.tolist() == [1.0] * 64
    assert {"dfx.json", "trace.json", "deps.json"} <= set(r.dfx)
    with open(r.dfx["trace.json"]) as f:
        assert json.load(f)["traceEvents"]
