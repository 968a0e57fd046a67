"""plexus.worker - plexus.Worker (one chip, or the chips of this host), its configuration,
the run result, and the probe (caps, doctor)."""
import json
import logging
import os
import sys
import threading
from typing import List

from ._plexus_cffi import ffi, lib
from .args import new_struct
from .callbacks import _CB_EXC
from .domain import chip_global
from .errors import InvalidArgument, StateError, check, error_from
from .kernels import Callable, CKernel, KernelLibrary, PyKernel, _KSLOTS
from .orchestration import Orchestration
from .tensors import _LIVE, _Memory

_log = logging.getLogger("plexus")

# ---- the worker ----

DFX_FILES = ("dfx.json", "trace.json", "deps.json", "deps.dot", "args/args_dump.json",
             "args/args.bin", "pmu.csv", "scope_stats.jsonl", "report.html")


class RunResult:
    """What w.run returns: .stats (w.stats() of the run), .dfx (output file name -> path of
    the files the run's DFX wrote; {} with DFX off), .out (the output directory or None),
    .host_arrays ({"in_place": n, "staged": m, "reason": why arrays were staged or None}:
    how the run's host array objects reached the kernels)."""

    def __init__(self, stats, out, dfx, host_arrays=None):
        self.stats = stats
        self.out = out
        self.dfx = dfx
        self.host_arrays = host_arrays if host_arrays is not None else \
            {"in_place": 0, "staged": 0, "reason": None}

    def __repr__(self):
        return "RunResult(tasks=%d, edges=%d, dfx=%s)" % (self.stats["tasks"],
                                                          self.stats["edges"], sorted(self.dfx))


_KNOB_ALIASES = {"profile": "PLEXUS_DEVICE_PROFILE", "out": "PLEXUS_DFX_OUT",
                 "dfx": "PLEXUS_DFX"}


def _knob_text(v):
    if isinstance(v, bool):
        return "1" if v else "0"
    if isinstance(v, (list, tuple)):
        return ",".join(str(x) for x in v)
    return str(v)


def config(level=2, cores=None, chips=None, profile=None, dfx=None, out=None, **knobs):
    """A px_config (cdata) from px_config_default() (PLEXUS_* environment) and these values;
    knobs are the PLEXUS_* names in lower case without the prefix (heap_ring="64M")."""
    cfg = new_struct("px_config")
    check(lib.px_config_default(cfg), "the PLEXUS_* environment")
    if level not in (2, 3):
        raise InvalidArgument("level=%r: plexus.Worker takes level 2 (one chip) or 3 (chips "
                              "of this host)" % (level,))
    cfg.level = level
    sets = []
    if cores is not None:
        sets.append(("PLEXUS_CORES", cores))
    if chips is not None:
        sets.append(("PLEXUS_CHIPS", chips))
    for k, v in (("profile", profile), ("dfx", dfx), ("out", out)):
        if v is not None:
            sets.append((_KNOB_ALIASES[k], os.fspath(v) if k == "out" else v))
    for k, v in knobs.items():
        sets.append(("PLEXUS_" + k.upper(), v))
    for name, v in sets:
        st = lib.px_config_set(cfg, name.encode(), _knob_text(v).encode())
        if st == lib.PX_ENOENT:
            raise InvalidArgument("plexus.Worker: unknown knob %s=%r (%s); `plexus doctor "
                                  "--config` lists the knobs" % (name[7:].lower(), v,
                                                                 name))
        check(st, "plexus.Worker %s=%r" % (name[7:].lower(), v))
    check(lib.px_config_validate(cfg), "plexus.Worker")
    return cfg


class Worker:
    """plexus.Worker(level=2|3, cores=, chips=, profile=, dfx=, out=, **knobs): one chip
    (level 2) or the chips of this host (level 3, one forked process per chip). Use as a
    context manager, or call close()."""

    def __init__(self, level=2, cores=None, chips=None, profile=None, dfx=None, out=None,
                 host_arrays="auto", **knobs):
        self._w = None
        self._mem = None
        if host_arrays not in ("auto", "in_place", "copy"):
            raise InvalidArgument("plexus.Worker: host_arrays=%r; use 'auto' (in place where "
                                  "the device reaches host memory, else copied), 'in_place' "
                                  "(refuse what cannot be) or 'copy'" % (host_arrays,))
        if host_arrays == "in_place" and level == 3:
            raise InvalidArgument("plexus.Worker: host_arrays='in_place' at level 3: the chips "
                                  "are other processes and cannot use this process's arrays "
                                  "in place; use 'auto' or 'copy'")
        self._cfg = config(level, cores, chips, profile, dfx, out, **knobs)
        self.level = level
        self.host_arrays = host_arrays
        self.out = ffi.string(self._cfg.out_dir).decode() if self._cfg.dfx else None
        wp = ffi.new("px_worker **")
        check(lib.px_worker_create(self._cfg, wp), "plexus.Worker")
        self._w = wp[0]
        self._mem = _Memory(self._w)
        _LIVE.add(self._mem)
        self._inited = False
        self._running = False
        self._kids = {}
        self._kid_names = {}  # kernel name -> (its C function, its id)
        self._cids = {}
        self._libs = []
        self._lock = threading.Lock()
        self._run_lock = threading.Lock()  # held by the thread whose run is going
        self._run_thread = None
        self._owner_pid = os.getpid()
        self._builtin = None

    # -- lifetime --
    def _live(self):
        if self._w is None:
            raise StateError("this plexus.Worker is closed; make a new one")
        if os.getpid() != self._owner_pid:
            raise StateError("this plexus.Worker belongs to process %d; a forked child cannot "
                             "use it" % self._owner_pid)
        return self._w

    def close(self):
        """Destroys the worker (at once, or when the last numpy view of its memory goes)."""
        if self._w is None:
            return
        if self._running:
            raise StateError("w.close() inside w.run; close the worker after the run returns")
        self._w = None
        mem, self._mem = self._mem, None
        _LIVE.discard(mem)
        if sys.getrefcount(mem) > 2:  # more than `mem` and getrefcount's argument
            _log.info("plexus.Worker.close: numpy views of the worker's memory are still held "
                      "(a kernel's or host task's argument kept, DeviceTensor.numpy()); the "
                      "worker is destroyed when the last of them is dropped")
            return
        check(mem.destroy(), "closing the worker")

    def __enter__(self):
        self._live()
        return self

    def __exit__(self, et, ev, tb):
        self.close()
        return False

    def __del__(self):
        try:
            if self._w is not None and not self._running:
                self.close()
        except Exception:  # noqa: BLE001 - nothing to report to at collection
            pass

    @property
    def cores(self):
        """Core threads of the worker's own engine (a level-3 worker's host side)."""
        return lib.px_worker_cores(self._live())

    @property
    def chips(self):
        """The number of chips (1 at level 2)."""
        return lib.px_worker_chips(self._live())

    @property
    def chip_cores(self):
        """Core threads of each chip (px_worker_cores at level 2)."""
        return lib.px_worker_chip_cores(self._live())

    # -- kernels and callables --
    def load_kernels(self, path, names=None):
        """Opens a shared library of C kernels; its kernels are its attributes (lib.scale).
        names: register these now (a level-3 worker registers kernels before its first
        run only)."""
        k = KernelLibrary(self, path, names)
        self._libs.append(k)
        return k

    def register(self, *objs):
        """Registers kernels and callables now (a level-3 worker needs every kernel and
        callable its chips use registered before its first run)."""
        for x in objs:
            if isinstance(x, Callable):
                self._callable_id(x)
            else:
                self._kernel_id(x)

    def _kernel_id(self, k):
        kid = self._kids.get(k)
        if kid is not None:
            return kid
        if not isinstance(k, (CKernel, PyKernel)):
            raise InvalidArgument("%r is not a kernel: pass w.load_kernels(...).name, "
                                  "plexus.builtin(w).name or a @plexus.kernel" % (k,))
        w = self._live()
        if self.level == 3 and self._inited:
            raise StateError("kernel %s is registered after the level-3 worker's chips were "
                             "started (its first run); register it before: w.register(k) or "
                             "w.load_kernels(path, names=[...])" % k.name)
        fn = k._cfn if isinstance(k, PyKernel) else k._fn
        same = self._kid_names.get(k.name)
        if same is not None:
            # another object for a kernel this worker has (the same library opened by another
            # worker: plexus.builtin(w1).scale used on w2): the same function is the same kernel
            if same[0] == fn:
                self._kids[k] = same[1]
                return same[1]
            raise InvalidArgument("kernel name %r is taken on this worker by another function "
                                  "(registered as kernel id %d); give this kernel another "
                                  "name (@plexus.kernel(name=...), or rename the C symbol)"
                                  % (k.name, same[1]))
        idp = ffi.new("px_kernel_id *")
        check(lib.px_kernel_register(w, k.name.encode(), fn, k._sig, idp),
              "registering kernel %s" % k.name)
        self._kids[k] = idp[0]
        self._kid_names[k.name] = (fn, idp[0])
        return idp[0]

    def _callable_id(self, c):
        cid = self._cids.get(c)
        if cid is not None:
            return cid
        if not isinstance(c, Callable):
            raise InvalidArgument("%r is not a callable: decorate a chip orchestration with "
                                  "@plexus.callable" % (c,))
        w = self._live()
        if self.level != 3:
            raise StateError("callables need a level-3 worker")
        if self._inited:
            raise StateError("callable %s is registered after the chips were started (the "
                             "first run); call w.register(c) before" % c.name)
        idp = ffi.new("px_callable_id *")
        check(lib.px_callable_register(w, c.name.encode(), lib.pxpy_callable_slot(c.slot), idp),
              "registering callable %s" % c.name)
        self._cids[c] = idp[0]
        return idp[0]

    def init(self):
        """Starts the chips of a level-3 worker (done by the first run otherwise); no-op at
        level 2."""
        w = self._live()
        if self._inited:
            return
        check(lib.pxpy_worker_init(w), "starting the worker")
        self._inited = True

    def _started(self, what: str):
        w = self._live()
        if self.level == 3 and not self._inited:
            raise StateError("%s is known once the level-3 worker has started (MPI starts "
                             "there under mpirun): call w.init() first, or read it in a run"
                             % what)
        return w

    @property
    def hosts(self) -> int:
        """The hosts of the job (px_worker_hosts): under mpirun the MPI ranks, each a
        level-3 worker; 1 for a worker that runs alone. Known once the worker has started
        (w.init() or its first run): StateError before."""
        return lib.px_worker_hosts(self._started("w.hosts"))

    @property
    def host(self) -> int:
        """This worker's host of the job, 0 .. hosts - 1 (px_worker_host); after w.init()
        as w.hosts."""
        return lib.px_worker_host(self._started("w.host"))

    def job_chips(self) -> List[int]:
        """Every chip of the job, host-major (rank = host * w.chips + chip), for a domain
        over every host's chips: o.domain(name, chips=w.job_chips(), ...). Each is
        plexus.chip_global(host, chip) when the job has several hosts, a plain chip index
        (0 .. chips - 1) when it has one, so the same program runs alone. It assumes that
        every host has as many chips as this one (the same chips=); name other layouts' chips
        with plexus.chip_global. After w.init(), as w.hosts."""
        hosts, chips = self.hosts, self.chips
        if hosts == 1:
            return list(range(chips))
        return [chip_global(h, c) for h in range(hosts) for c in range(chips)]

    # -- runs --
    def run(self, fn):
        """Runs fn(o) as the orchestration (on this thread); returns a RunResult. Raises the
        orchestration's own exception, or the plexus.Error of the first failed task (a
        Python kernel's exception is its __cause__). Threads may take turns running one
        worker; a run started while another thread's run of the same worker is going raises
        StateError at once (use one worker per thread to run at the same time)."""
        w = self._live()
        if not self._run_lock.acquire(blocking=False):
            if self._run_thread == threading.get_ident():
                raise StateError("w.run inside a run of the same worker; submit from the "
                                 "running orchestration instead")
            raise StateError("w.run from thread %d while thread %s runs this worker: a worker "
                             "runs one run at a time (threads may take turns, not overlap); "
                             "wait for that run to return (join the thread, or share a "
                             "threading.Lock), or give each thread its own plexus.Worker"
                             % (threading.get_ident(), self._run_thread))
        try:
            self._run_thread = threading.get_ident()
            return self._run(w, fn)
        finally:
            self._run_thread = None
            self._run_lock.release()

    def _run(self, w, fn):
        if not self._inited:
            self.init()
        orch = Orchestration(self, None, fn)
        h = ffi.new_handle(orch)
        args = ffi.new("px_task_args *")
        del _CB_EXC[:]
        self._running = True
        st = lib.PX_EABORTED  # until px_run says otherwise
        try:
            st = lib.px_run(w, lib.pxpy_orch_cb, args, h)
            err = error_from(st) if st else None
        finally:
            self._running = False
            del self._mem.pinned[:]
            for d in orch._domains:  # a failed run freed the domains it made (px_run)
                if not d.keep or st != lib.PX_OK:
                    d._released = True
        if orch._exc is not None:
            raise orch._exc
        if err is not None:
            cause = next((e for e in _CB_EXC), None)
            del _CB_EXC[:]
            raise err from cause
        return RunResult(self.stats(), self.out, self._dfx_files(),
                         dict(orch._host_counts, reason=orch._host_reason))

    def _dfx_files(self):
        if not self.out:
            return {}
        return {n: os.path.join(self.out, n) for n in DFX_FILES
                if os.path.exists(os.path.join(self.out, n))}

    def stats(self):
        """The statistics of the most recent run, as a dict (px_run_stats' fields)."""
        s = ffi.new("px_run_stats *")
        check(lib.px_run_stats_get(self._live(), s), "w.stats")
        return {name: getattr(s, name) for name, _ in ffi.typeof("px_run_stats").fields}

    def config_text(self):
        """The knob table of this worker's configuration, as text."""
        t = lib.pxpy_config_text(self._cfg)
        try:
            return ffi.string(t).decode() if t != ffi.NULL else ""
        finally:
            lib.pxpy_free(t)


def builtin(worker):
    """The package's built-in C kernels on worker: scale, add, add_scalar, mul, matmul, noop
    and fail (python/kernels/pykernels.c)."""
    if worker._builtin is None:
        here = os.path.dirname(os.path.abspath(__file__))
        worker._builtin = worker.load_kernels(os.path.join(here, "libplexus_pykernels.so"))
    return worker._builtin


def caps(profile=None, hugepages=None):
    """The capability probe as a dict: {fact: {"value", "source", "note"}} (plexus doctor
    --json's "facts")."""
    c = ffi.new("px_caps *")
    if profile is None and hugepages is None:
        check(lib.px_caps_probe(c), "plexus.caps")
    else:
        kw = {}
        if hugepages is not None:
            kw["hugepages"] = int(bool(hugepages))
        cfg = config(profile=profile, **kw)
        check(lib.px_caps_probe_with(cfg, c), "plexus.caps")
    j = lib.pxpy_caps_json(c)
    if j == ffi.NULL:
        raise error_from(lib.PX_ENOMEM, "plexus.caps")
    try:
        return json.loads(ffi.string(j).decode())["facts"]
    finally:
        lib.pxpy_free(j)


def doctor(profile=None):
    """What `plexus doctor` reports, as a dict: facts, the device profiles, DFX, the knob
    table and the Python binding's own facts."""
    cfg = config(profile=profile)
    p = lib.px_device_profiles()
    profiles = []
    i = 0
    while p[i] != ffi.NULL:
        profiles.append(ffi.string(p[i]).decode())
        i += 1
    t = lib.pxpy_config_text(cfg)
    try:
        text = ffi.string(t).decode() if t != ffi.NULL else ""
    finally:
        lib.pxpy_free(t)
    return {"facts": caps(profile), "profiles": profiles,
            "dfx_compiled_in": bool(lib.px_dfx_compiled_in()), "config": text,
            "python": {"gil_released_in_c_calls": True, "fork_hook": bool(lib.pxpy_fork_hook()),
                       "kernel_slots": lib.pxpy_slots(), "kernel_slots_used": _KSLOTS.used()}}


def chip_index():
    """The chip this process runs (inside a level-3 callable or kernel), else -1."""
    return lib.px_chip_index()
