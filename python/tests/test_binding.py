"""The binding itself: declarations generated from the headers, loud failure on an unknown
construct, the GIL released during C calls."""
import os
import re
import subprocess
import sys
import threading
import time

import numpy as np
import pytest

import plexus
from plexus import ffi, lib

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
INCLUDE = os.path.join(ROOT, "include")
GEN = os.path.join(ROOT, "python", "gen_ffi.py")


def public_functions():
    names = []
    for h in os.listdir(os.path.join(INCLUDE, "plexus")):
        with open(os.path.join(INCLUDE, "plexus", h)) as f:
            text = f.read().replace("\n", " ")
        names += re.findall(r"PX_API\s+[\w\s\*]+?\b(px_\w+)\s*\(", text)
    return sorted(set(names))


def test_every_public_function_is_bound():
    names = public_functions()
    assert len(names) > 80  # the headers declare about a hundred functions
    missing = [n for n in names if not hasattr(lib, n)]
    assert missing == []


def test_collectives_follow_the_headers_names():
    for n in ("px_comm_allreduce", "px_comm_allgather", "px_comm_reduce_scatter",
              "px_comm_broadcast", "px_comm_alltoall", "px_comm_alltoallv"):
        assert hasattr(lib, n)


def test_struct_layout_matches_the_compiler():
    # API mode: cffi checks sizes against the C compiler; the fields come from the headers
    assert ffi.sizeof("px_task_args") > lib.PX_MAX_ARGS * ffi.sizeof("px_tensor")
    assert [f for f, _ in ffi.typeof("px_tensor").fields] == ["addr", "dtype", "ndim", "shape",
                                                               "stride", "offset"]


def run_gen(tmp_path, extra_header):
    inc = tmp_path / "include"
    (inc / "plexus").mkdir(parents=True)
    for h in os.listdir(os.path.join(INCLUDE, "plexus")):
        with open(os.path.join(INCLUDE, "plexus", h)) as f:
            (inc / "plexus" / h).write_text(f.read())
    if extra_header is not None:
        (inc / "plexus" / "extra.h").write_text(extra_header)
    return subprocess.run([sys.executable, GEN, "--include", str(inc), "--out",
                           str(tmp_path / "out.c")], capture_output=True, text=True)


def test_generator_accepts_the_headers(tmp_path):
    r = run_gen(tmp_path, None)
    assert r.returncode == 0, r.stderr
    assert "px_comm_allreduce" in (tmp_path / "out.c").read_text()


def test_generator_takes_a_new_header_and_its_macros(tmp_path):
    r = run_gen(tmp_path, "#define PX_EXTRA_MAX 7\n"
                          "#define PX_EXTRA_INIT { 1 }\n"
                          "typedef struct px_extra { int size; } px_extra;\n"
                          "PX_API int px_extra_fn(px_extra *e);\n")
    assert r.returncode == 0, r.stderr
    out = (tmp_path / "out.c").read_text()
    assert "px_extra_fn" in out and "PX_EXTRA_MAX" in out
    assert "PX_EXTRA_INIT: not an integer constant" in out  # listed, with why


def test_generator_fails_loudly_on_an_unknown_construct(tmp_path):
    r = run_gen(tmp_path, "static inline int px_inline(void) { return 1; }\n")
    assert r.returncode != 0
    assert "gen_ffi" in r.stderr and "px_inline" in r.stderr


def test_generator_fails_on_an_unknown_system_header(tmp_path):
    r = run_gen(tmp_path, "#include <pthread.h>\n")
    assert r.returncode != 0
    assert "STAND_INS" in r.stderr


def test_c_calls_release_the_gil(w, k):
    out = np.zeros(1, np.int64)
    done = threading.Event()
    seen = []

    def runner():
        w.run(lambda o: o.submit(k.busy, args=[plexus.Out(out), 300.0]))
        done.set()

    t = threading.Thread(target=runner)
    t.start()
    n = 0
    deadline = time.monotonic() + 30
    while not done.is_set() and time.monotonic() < deadline:
        n += 1
        if n % 1000 == 0:
            seen.append(n)
    t.join(30)
    assert done.is_set()
    assert out[0] > 0
    assert len(seen) > 10  # this thread ran Python while the C kernel ran


def test_version():
    assert re.fullmatch(r"\d+\.\d+\.\d+", plexus.__version__)


def test_versioned_structs_get_their_size_and_version():
    # a header that gains size/version fields (and an initializer macro the cdef cannot
    # take) is followed without a change to the package: new_struct fills them as the macro
    # would, from sizeof and the PX_<TYPE>_VERSION constant
    import cffi
    from plexus.args import new_struct
    f2 = cffi.FFI()
    f2.cdef("typedef struct px_thing { unsigned size; int version; double x; } px_thing;")

    class FakeLib:
        PX_THING_VERSION = 3

    p = new_struct("px_thing", f2, FakeLib)
    assert (p.size, p.version, p.x) == (f2.sizeof("px_thing"), 3, 0.0)
    # today's versioned structs get what PX_CONFIG_INIT / PX_DOMAIN_SPEC_INIT set
    for t, ver in (("px_config", lib.PX_CONFIG_VERSION),
                   ("px_domain_spec", lib.PX_DOMAIN_SPEC_VERSION)):
        p = new_struct(t)
        assert ffi.sizeof(p[0]) == ffi.sizeof(t)
        assert (p.size, p.version) == (ffi.sizeof(t), ver)
