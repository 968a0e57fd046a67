"""plexus.testing - scene tests: a class declares what runs, its cases, how to make the
arguments and how to compute the golden; the plugin runs every case on the chosen device
profile, comm transport and number of chips and compares the outputs with dtype-aware
tolerances.

    import numpy as np, plexus
    from plexus.testing import SceneTest

    class TestScale(SceneTest):
        cases = [{"n": 16}, {"n": 1 << 16}]

        def generate_args(self, case, rng):
            return {"x": rng.standard_normal(case["n"]).astype(np.float32),
                    "y": np.zeros(case["n"], np.float32)}

        def compute_golden(self, case, args):
            return {"y": args["x"] * 2}

        def callable(self, o, k, args, case):     # the orchestration of one case
            o.submit(k.scale, inputs=[args["x"]], outputs=[args["y"]], scalars=[2.0])

    if __name__ == "__main__":
        TestScale.main()

pytest loads the plugin with `-p plexus.testing` (or `pytest_plugins = ["plexus.testing"]`
in a conftest.py); its options are --plexus-profile, --plexus-transport (auto, direct,
staged), --plexus-chips and --plexus-platform (sim). The same class runs as a script with
the same options. A class with level = 3 gets a level-3 worker with --plexus-chips chips;
its `register` may register kernels and callables before the chips start.
"""
import argparse
import sys

import numpy as np

from .worker import Worker, builtin
from .errors import InvalidArgument

# (rtol, atol) per dtype kind/size; integers compare exactly
TOLERANCES = {np.dtype(np.float32): (1e-5, 1e-6), np.dtype(np.float64): (1e-12, 1e-14),
              np.dtype(np.float16): (1e-3, 1e-4)}


class Options:
    def __init__(self, platform="sim", profile=None, transport="auto", chips=2):
        if platform != "sim":
            raise InvalidArgument("--plexus-platform %r: this build has the sim platform only"
                                  % platform)
        if transport not in ("auto", "direct", "staged"):
            raise InvalidArgument("--plexus-transport %r: use auto, direct or staged"
                                  % transport)
        self.platform, self.profile, self.transport = platform, profile, transport
        self.chips = int(chips)

    def __repr__(self):
        return "platform=%s profile=%s transport=%s chips=%d" % (
            self.platform, self.profile or "default", self.transport, self.chips)


def compare(name, got, want, rtol=None, atol=None):
    """Raises AssertionError naming the output, the first differing index and the error when
    got and want differ beyond the dtype's tolerance (exact for integers)."""
    got = np.asarray(got)
    want = np.asarray(want)
    if got.shape != want.shape:
        raise AssertionError("output %r: shape %s, golden %s" % (name, got.shape, want.shape))
    if got.dtype.kind in "iub":
        bad = got != want
    else:
        r, a = TOLERANCES.get(got.dtype, (1e-6, 1e-7))
        r = r if rtol is None else rtol
        a = a if atol is None else atol
        bad = ~np.isclose(got, want, rtol=r, atol=a, equal_nan=True)
    if bad.any():
        idx = tuple(int(i) for i in np.argwhere(bad)[0])
        err = np.abs(got.astype(np.float64) - want.astype(np.float64))
        raise AssertionError("output %r (%s): %d of %d elements differ from the golden; first "
                             "at %s: got %r, want %r; max abs error %g"
                             % (name, got.dtype, int(bad.sum()), got.size, idx, got[idx],
                                want[idx], float(err.max())))


class SceneTest:
    """Base of a scene test class; see the module's doc. Attributes: cases (list of dicts),
    level (2 or 3), cores (None: the default), rtol/atol (None: by dtype), seed."""

    cases = [{}]
    level = 2
    cores = None
    rtol = None
    atol = None
    seed = 1234

    def generate_args(self, case, rng):
        raise NotImplementedError("a SceneTest defines generate_args(self, case, rng)")

    def compute_golden(self, case, args):
        raise NotImplementedError("a SceneTest defines compute_golden(self, case, args)")

    def callable(self, o, k, args, case):
        raise NotImplementedError("a SceneTest defines callable(self, o, k, args, case)")

    def register(self, w):
        """Registers what a level-3 case needs before the chips start (optional)."""

    def run_case(self, case, opts=None):
        """Runs one case and compares; returns the run's RunResult."""
        opts = opts or Options()
        rng = np.random.default_rng(self.seed)
        args = self.generate_args(case, rng)
        golden = self.compute_golden(case, {n: np.array(v, copy=True) for n, v in args.items()})
        kw = {}
        if opts.profile:
            kw["profile"] = opts.profile
        if opts.transport != "auto":
            kw["comm_transport"] = opts.transport
        if self.level == 3:
            kw["chips"] = opts.chips
        with Worker(level=self.level, cores=self.cores, **kw) as w:
            k = builtin(w)
            self.register(w)
            r = w.run(lambda o: self.callable(o, k, args, case))
        for name, want in golden.items():
            if name not in args:
                raise AssertionError("compute_golden returned %r, which generate_args did not "
                                     "make" % name)
            compare(name, args[name], want, self.rtol, self.atol)
        return r

    @classmethod
    def main(cls, argv=None):
        """Runs every case as a script: prints a line per case, then PASS or FAIL; exits."""
        ap = argparse.ArgumentParser(description="scene test %s" % cls.__name__)
        _add_options(ap.add_argument, prefix="--plexus-")
        a = ap.parse_args(argv)
        opts = Options(a.plexus_platform, a.plexus_profile, a.plexus_transport, a.plexus_chips)
        failed = 0
        for i, case in enumerate(cls.cases):
            try:
                cls().run_case(case, opts)
                print("%s case %d %s (%s): ok" % (cls.__name__, i, case, opts))
            except Exception as e:  # noqa: BLE001 - every failure is reported per case
                failed += 1
                print("%s case %d %s (%s): %s: %s" % (cls.__name__, i, case, opts,
                                                      type(e).__name__, e))
        print("PASS" if not failed else "FAIL: %d of %d cases" % (failed, len(cls.cases)))
        sys.exit(1 if failed else 0)

    # pytest: one test per case (pytest_generate_tests below parametrizes scene_case)
    def test_scene(self, scene_case, plexus_options):
        self.run_case(scene_case, plexus_options)


def _add_options(add, prefix):
    add(prefix + "platform", default="sim", help="platform (sim)")
    add(prefix + "profile", default=None, help="device profile (default, a2a3-pcie, ...)")
    add(prefix + "transport", default="auto", help="comm transport: auto, direct or staged")
    add(prefix + "chips", default=2, type=int, help="chips of level-3 scene tests")


# ---- the pytest plugin ----

def pytest_addoption(parser):
    g = parser.getgroup("plexus", "plexus scene tests")
    _add_options(g.addoption, prefix="--plexus-")


def pytest_generate_tests(metafunc):
    cls = metafunc.cls
    if cls is not None and issubclass(cls, SceneTest) and "scene_case" in metafunc.fixturenames:
        ids = ["-".join("%s=%s" % kv for kv in sorted(c.items())) or "case%d" % i
               for i, c in enumerate(cls.cases)]
        metafunc.parametrize("scene_case", cls.cases, ids=ids)


def _options_fixture(request):
    c = request.config
    return Options(c.getoption("--plexus-platform"), c.getoption("--plexus-profile"),
                   c.getoption("--plexus-transport"), c.getoption("--plexus-chips"))


try:
    import pytest

    plexus_options = pytest.fixture(_options_fixture, name="plexus_options")
except ImportError:  # the script mode needs no pytest
    pass
