"""plexus.testing: scene test classes, run per case on the chosen profile and transport
(ctest runs this file three times: default options, --plexus-transport staged, and
--plexus-profile a2a3-pcie)."""
import os
import subprocess
import sys

import numpy as np
import pytest

import plexus
from busy import MatmulThread
from plexus.testing import SceneTest, Options, compare


class TestScaleScene(SceneTest):
    cases = [{"n": 16}, {"n": 4096}]

    def generate_args(self, case, rng):
        return {"x": rng.standard_normal(case["n"]).astype(np.float32),
                "y": np.zeros(case["n"], np.float32)}

    def compute_golden(self, case, args):
        return {"y": args["x"] * np.float32(1.5)}

    def callable(self, o, k, args, case):
        o.submit(k.scale, inputs=[args["x"]], outputs=[args["y"]], scalars=[1.5])


@plexus.kernel
def cumsum_kernel(x, y):
    y[:] = np.cumsum(x)


class TestIntScene(SceneTest):
    cases = [{"n": 10, "dtype": "int64"}, {"n": 100, "dtype": "int32"}]

    def generate_args(self, case, rng):
        return {"x": rng.integers(-50, 50, case["n"]).astype(case["dtype"]),
                "y": np.zeros(case["n"], case["dtype"])}

    def compute_golden(self, case, args):
        return {"y": np.cumsum(args["x"]).astype(case["dtype"])}

    def callable(self, o, k, args, case):
        o.submit(cumsum_kernel, inputs=[args["x"]], outputs=[args["y"]])


class TestAllreduceScene(SceneTest):
    level = 3
    cores = 1
    cases = [{"count": 256, "dtype": "float32", "op": "sum"},
             {"count": 1000, "dtype": "int64", "op": "max"}]

    def generate_args(self, case, rng):
        self.n = n = 2
        return {"x": rng.integers(0, 100, (n, case["count"])).astype(case["dtype"]),
                "y": np.zeros((n, case["count"]), case["dtype"])}

    def compute_golden(self, case, args):
        red = {"sum": np.sum, "max": np.max}[case["op"]](args["x"], axis=0)
        return {"y": np.stack([red] * args["x"].shape[0]).astype(case["dtype"])}

    def callable(self, o, k, args, case):
        n = o.chips
        nb = case["count"] * np.dtype(case["dtype"]).itemsize
        with o.domain("scene", chips=list(range(n)), window=nb + 4096, buffers={"b": nb}) as d:
            for r in range(n):
                o.write(d, r, "b", args["x"][r % 2])
            o.allreduce(d, "b", case["count"], case["dtype"], case["op"])
            for r in range(2):
                o.read(d, r, "b", args["y"][r])


def test_the_options_reach_the_worker(plexus_options):
    # the ctest variants pass --plexus-transport / --plexus-profile; the run must use them
    out = {}
    with plexus.Worker(level=3, chips=2, cores=1,
                       **({"profile": plexus_options.profile} if plexus_options.profile
                          else {}),
                       **({"comm_transport": plexus_options.transport}
                          if plexus_options.transport != "auto" else {})) as w:
        def orch(o):
            with o.domain("t", chips=[0, 1], window=4096, buffers={"b": 64}) as d:
                out["t"] = d.transport(0, 1)
        w.run(orch)
    want = "staged" if (plexus_options.transport == "staged" or
                        plexus_options.profile == "a2a3-pcie") else "direct"
    assert out["t"] == want


def test_level3_scene_beside_a_matmul_thread(plexus_options):
    # issue 34: a level-3 scene case whose chips fork while another thread multiplies
    # matrices with numpy (OpenBLAS's pool busy, where numpy runs on it)
    mm = MatmulThread()
    mm.start()
    try:
        assert mm.wait_for(1)
        for case in TestAllreduceScene.cases:
            TestAllreduceScene().run_case(case, plexus_options)
        n = mm.done
        assert mm.wait_for(n + 2)
    finally:
        assert mm.stop()
    assert mm.bad == 0


def test_a_wrong_golden_fails_with_the_place():
    class Wrong(TestScaleScene):
        def compute_golden(self, case, args):
            g = args["x"] * np.float32(1.5)
            g[3] += 1
            return {"y": g}

    with pytest.raises(AssertionError, match=r"1 of 16 elements differ.*first at \(3,\)"):
        Wrong().run_case({"n": 16})


def test_tolerances_by_dtype():
    compare("f", np.float32([1.0]), np.float32([1.0 + 1e-7]))
    with pytest.raises(AssertionError):
        compare("f", np.float32([1.0]), np.float32([1.001]))
    with pytest.raises(AssertionError):
        compare("i", np.int32([1]), np.int32([2]))
    with pytest.raises(AssertionError, match="shape"):
        compare("s", np.zeros(2), np.zeros(3))


def test_options_are_checked():
    with pytest.raises(plexus.InvalidArgument, match="sim platform only"):
        Options(platform="cuda")
    with pytest.raises(plexus.InvalidArgument, match="auto, direct or staged"):
        Options(transport="carrier-pigeon")


SCRIPT = '''
import numpy as np, sys
sys.path.insert(0, %r)
from test_scene import TestScaleScene, TestAllreduceScene
{cls}.main()
'''


@pytest.mark.parametrize("cls,extra", [("TestScaleScene", []),
                                       ("TestAllreduceScene", ["--plexus-profile",
                                                               "a2a3-pcie"])])
def test_the_same_class_runs_as_a_script(tmp_path, cls, extra):
    here = os.path.dirname(os.path.abspath(__file__))
    f = tmp_path / "scene.py"
    f.write_text(SCRIPT.replace("{cls}", cls) % here)
    r = subprocess.run([sys.executable, str(f)] + extra, capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.count(": ok") == 2 and r.stdout.rstrip().endswith("PASS")
