"""plexus._core - workers, orchestrations, tensors and kernels over libplexus (cffi).

Threads: every C call releases the GIL (cffi API mode); the runtime's threads that call back
into Python (the orchestration on px_run's thread, Python kernels on core threads, host
tasks) take it for the callback (cffi's extern "Python"). Python kernels therefore run one
at a time per process: the documented slow path. C kernels run without the GIL.
"""
import json
import logging
import os
import sys
import threading
import traceback
import weakref
from typing import Optional, Sequence

import numpy as np

from ._plexus_cffi import ffi, lib
from .errors import (Error, InvalidArgument, OutOfMemory, StateError, KernelError, NotFound,
                     check, error_from)

_log = logging.getLogger("plexus")

# ---- dtypes ----

_NP_OF = {lib.PX_F32: np.dtype(np.float32), lib.PX_F64: np.dtype(np.float64),
          lib.PX_I32: np.dtype(np.int32), lib.PX_I64: np.dtype(np.int64),
          lib.PX_U8: np.dtype(np.uint8)}
_PX_OF = {v: k for k, v in _NP_OF.items()}
_PX_BY_NAME = {ffi.string(lib.px_dtype_name(k)).decode(): k for k in _NP_OF}


def px_dtype(dtype):
    """The px_dtype code of a numpy dtype (or of a plexus name such as "f32")."""
    if isinstance(dtype, str) and dtype in _PX_BY_NAME:
        return _PX_BY_NAME[dtype]
    try:
        d = np.dtype(dtype)
    except TypeError:
        raise InvalidArgument("dtype %r is not a dtype; plexus tensors hold %s"
                              % (dtype, _dtype_list())) from None
    if d.byteorder == ">" or d not in _PX_OF:
        raise InvalidArgument("dtype %s has no plexus equivalent; plexus tensors hold %s "
                              "(convert with arr.astype(...))" % (d, _dtype_list()))
    return _PX_OF[d]


def np_dtype(code):
    return _NP_OF[code]


def _dtype_list():
    return ", ".join("%s (%s)" % (n, _NP_OF[c].name) for n, c in _PX_BY_NAME.items())


_TAG = {"in": lib.PX_TAG_IN, "out": lib.PX_TAG_OUT, "inout": lib.PX_TAG_INOUT,
        "output_existing": lib.PX_TAG_OUTPUT_EXISTING, "no_dep": lib.PX_TAG_NO_DEP}
_WRITES = (lib.PX_TAG_OUT, lib.PX_TAG_INOUT, lib.PX_TAG_OUTPUT_EXISTING)
_IN, _OUT, _INOUT = lib.PX_TAG_IN, lib.PX_TAG_OUT, lib.PX_TAG_INOUT


class _Slow(Exception):
    """submit's fast path cannot take this call."""
_SC_F64 = 0x80 | lib.PX_SCALAR_F64
_SC_I64 = 0x80 | lib.PX_SCALAR_I64
_SC_U64 = 0x80 | lib.PX_SCALAR_U64


class _Arg:
    tag = None

    def __init__(self, x):
        self.x = x


class In(_Arg):
    """An argument read by the task (RAW dependencies)."""
    tag = lib.PX_TAG_IN


class Out(_Arg):
    """An argument written by the task (WAW and WAR dependencies)."""
    tag = lib.PX_TAG_OUT


class InOut(_Arg):
    tag = lib.PX_TAG_INOUT


class OutputExisting(_Arg):
    tag = lib.PX_TAG_OUTPUT_EXISTING


class NoDep(_Arg):
    """Passed to the kernel, ignored by the dependency inference."""
    tag = lib.PX_TAG_NO_DEP


class U64:
    """An unsigned 64-bit scalar (plain ints are passed as signed i64, floats as f64)."""

    def __init__(self, v):
        v = int(v)
        if v < 0 or v >= 1 << 64:
            raise InvalidArgument("U64(%d) is out of range 0 .. 2**64-1" % v)
        self.v = v


class Pick:
    """A per-task tensor argument of o.submit_many: task i takes tensors[index[i]].

    tensors is a sequence of arrays (or device tensors), index a 1-D sequence of integers
    (a numpy index array: ``plexus.Pick(rows, np.arange(n) % len(rows))``), one per task."""

    __slots__ = ("tensors", "index")

    def __init__(self, tensors: Sequence[object], index: object) -> None:
        self.tensors = list(tensors)
        self.index = index

    def __repr__(self) -> str:
        return "Pick(%d tensors, %d tasks)" % (len(self.tensors), len(self.index))


def _as_array(x, what):
    """A numpy array over x's memory (no copy), or a clear refusal."""
    if isinstance(x, np.ndarray):
        return x
    if x is None:
        raise InvalidArgument("%s is None; pass a numpy array (or an object with the buffer "
                              "protocol, __array_interface__ or __dlpack__)" % what)
    if isinstance(x, (list, tuple, int, float, str)):
        raise InvalidArgument("%s is a %s, not memory a task can work on; pass a numpy array "
                              "(np.asarray(x, dtype=...))" % (what, type(x).__name__))
    if hasattr(x, "__array_interface__"):
        return np.asarray(x)
    try:
        return np.asarray(memoryview(x))
    except TypeError:
        pass
    if hasattr(x, "__dlpack__"):
        return np.from_dlpack(x)
    raise InvalidArgument("%s (%s) has neither the buffer protocol, __array_interface__ nor "
                          "__dlpack__; pass a numpy array" % (what, type(x).__name__))


class _Memory:
    """A worker's C handle, destroyed when its last holder lets go: the Worker (until close)
    and every numpy view of the worker's memory that Python code holds (a kernel's or host
    task's argument, DeviceTensor.numpy()): such a view keeps the memory it shows mapped,
    so no Python object ever points at memory the runtime has freed. .pinned holds the host
    arrays the current run uses in place, which the views of that run keep alive too."""

    def __init__(self, w):
        self.w = w
        self.pid = os.getpid()
        self.pinned = []

    def destroy(self):
        w, self.w = self.w, None
        if w is None or os.getpid() != self.pid:  # a forked child's copy owns nothing
            return 0
        return lib.px_worker_destroy(w)

    def __del__(self):
        try:
            st = self.destroy()
            if st:
                _log.warning("plexus: destroying a worker whose last view went away: %s",
                             error_from(st))
        except Exception:  # noqa: BLE001 - nothing to report to at collection
            pass


# the _Memory of every open Worker of this process
_LIVE = weakref.WeakSet()


def _keep_now():
    """What a view handed to Python code must keep alive: every open worker's memory and the
    host arrays their runs use in place (a kernel cannot tell which worker runs it)."""
    mems = tuple(_LIVE)
    return mems + tuple(a for m in mems for a in m.pinned)


def _view(t, writeable=True, keep=None):
    """A numpy view of px_tensor t (a cdata px_tensor or px_tensor *), strides included. The
    view's base keeps `keep` alive (see _Memory)."""
    dt = _NP_OF.get(t.dtype)
    if dt is None:
        raise InvalidArgument("tensor has the invalid dtype code %d" % t.dtype)
    nd = t.ndim
    shape = tuple(t.shape[0:nd])
    strides = tuple(s * dt.itemsize for s in t.stride[0:nd])
    if any(s == 0 for s in shape):
        return np.empty(shape, dt)
    span = (sum((e - 1) * s for e, s in zip(shape, t.stride[0:nd])) + 1) * dt.itemsize
    base = ffi.cast("char *", t.addr) + t.offset * dt.itemsize
    if keep is not None:
        # a pointer that owns nothing but holds keep: ffi.buffer keeps the pointer alive,
        # the numpy array keeps the buffer (its base)
        base = ffi.gc(base, lambda _p, k=keep: None)
    a = np.ndarray(shape, dt, buffer=ffi.buffer(base, span), strides=strides)
    if not writeable:
        a.flags.writeable = False
    return a


class DeviceTensor:
    """A tensor in device memory (o.alloc, a callable's arguments, a domain buffer).

    .numpy() is a view of its bytes (the sim platform's device memory is this process's
    memory): valid while the tensor lives (its scope, or the callable's run), read only after
    the tasks writing it have finished."""

    def __init__(self, t, owner=None, scope=None, keep=None):
        self._t = t
        self._owner = owner
        self._scope = scope
        self._keep = keep
        self.dtype = _NP_OF[t.dtype]
        self.shape = tuple(t.shape[0:t.ndim])

    def _live(self):
        if self._owner is not None and self._owner._dead(self._scope):
            raise StateError("device tensor %s %s is used after its scope ended (or its run "
                             "returned); allocate it in a scope that lives long enough"
                             % (self.dtype, self.shape))
        return self._t

    def numpy(self):
        """A view of the tensor's bytes: it keeps the worker's memory mapped while it lives,
        but its bytes are the tensor's only while the tensor lives (its scope)."""
        return _view(self._live(), keep=_keep_now())

    def __array__(self, dtype=None):
        a = self.numpy()
        return a if dtype is None else a.astype(dtype)

    def __dlpack__(self, stream=None):
        return self.numpy().__dlpack__()

    def __dlpack_device__(self):
        return (1, 0)  # kDLCPU: sim device memory is host memory

    def __repr__(self):
        return "DeviceTensor(%s, %s)" % (self.dtype, self.shape)


# ---- kernels ----

class CKernel:
    """A C kernel (a px_kernel_fn) from a shared library, found by symbol name."""

    def __init__(self, name, fn, sig, library):
        self.name = name
        self._fn = fn
        self._sig = sig
        self._library = library  # keeps the library open

    def __repr__(self):
        return "CKernel(%r)" % self.name


class KernelLibrary:
    """w.load_kernels(path): its kernels as attributes (lib.scale), registered on first use
    under the name "<library>.<symbol>" (e.g. "mykernels.scale")."""

    def __init__(self, worker, path, names):
        self._worker = worker
        self.path = os.fspath(path)
        h = lib.pxpy_dlopen(self.path.encode())
        if h == ffi.NULL:
            raise NotFound("load_kernels: cannot open %s: %s; build the library and pass its "
                           "path" % (self.path, ffi.string(lib.pxpy_dlerror()).decode()))
        self._h = h
        stem = os.path.basename(self.path).split(".")[0]
        self._stem = stem[3:] if stem.startswith("lib") else stem
        self._kernels = {}
        for n in names or ():
            getattr(self, n)

    def __getattr__(self, sym):
        if sym.startswith("_"):
            raise AttributeError(sym)
        k = self._kernels.get(sym)
        if k is None:
            fn = lib.pxpy_dlsym(self._h, sym.encode())
            if fn == ffi.NULL:
                raise NotFound("kernel library %s has no symbol %r; export the kernel "
                               "function (visibility default) under that name"
                               % (self.path, sym))
            sig = lib.pxpy_dlsym(self._h, (sym + "_sig").encode())
            k = CKernel("%s.%s" % (self._stem, sym), ffi.cast("px_kernel_fn", fn),
                        ffi.cast("px_signature *", sig) if sig != ffi.NULL else ffi.NULL, self)
            self._worker._kernel_id(k)  # registers now (a level-3 worker needs it early)
            self._kernels[sym] = k
        return k

    def __getitem__(self, sym):
        return getattr(self, sym)


class _Slots:
    """The C trampolines of one kind (kernels or callables) and the Python object each one
    calls. An entry is a weak reference: a kernel registered on a live worker is kept alive
    by that worker, so a slot whose object was collected is free again (a test suite that
    makes kernels inside its tests does not run out)."""

    def __init__(self, what):
        self.what = what
        self.refs = [None] * lib.pxpy_slots()
        self.lock = threading.Lock()

    def take(self, obj):
        with self.lock:
            for i, r in enumerate(self.refs):
                if r is None or r() is None:
                    self.refs[i] = weakref.ref(obj)
                    return i
        raise InvalidArgument("%s: %d of them are alive in this process (the limit of its "
                              "trampolines); let unused ones go, or use C kernels"
                              % (self.what, len(self.refs)))

    def get(self, i):
        r = self.refs[i]
        return r() if r is not None else None

    def used(self):
        return sum(1 for r in self.refs if r is not None and r() is not None)


_KSLOTS = _Slots("@plexus.kernel")
_CSLOTS = _Slots("@plexus.callable")


class PyKernel:
    """A Python function run as a kernel (@plexus.kernel): it receives numpy views of its
    tensor arguments (inputs read-only) and the scalars as numbers, in argument order; with
    comm=True the last argument is the domain's communicator (plexus.Comm). The GIL
    serialises Python kernels: use them for convenience, C kernels for speed."""

    def __init__(self, fn, name=None, comm=False):
        self.fn = fn
        self.comm = comm
        self.slot = _KSLOTS.take(self)
        base = name or getattr(fn, "__qualname__", "kernel")
        self.name = ("py%d.%s" % (self.slot, base))[:lib.PX_KERNEL_NAME_MAX - 1]
        self._cfn = lib.pxpy_kernel_slot(self.slot)
        self._sig = ffi.NULL
        self.__doc__ = getattr(fn, "__doc__", None)

    def __call__(self, *a, **kw):
        return self.fn(*a, **kw)

    def __repr__(self):
        return "PyKernel(%r)" % self.name


def kernel(fn=None, *, name=None, comm=False):
    """Decorator: @plexus.kernel or @plexus.kernel(name=..., comm=True)."""
    if fn is None:
        return lambda f: PyKernel(f, name, comm)
    return PyKernel(fn, name, comm)


class Callable:
    """A Python chip orchestration for level 3 (@plexus.callable): fn(o, *args) runs inside
    a chip process with o the chip's orchestration and args its device tensors and scalars."""

    def __init__(self, fn, name=None):
        self.fn = fn
        self.slot = _CSLOTS.take(self)
        base = name or getattr(fn, "__qualname__", "callable")
        self.name = ("py%d.%s" % (self.slot, base))[:lib.PX_KERNEL_NAME_MAX - 1]

    def __repr__(self):
        return "Callable(%r)" % self.name


def callable(fn=None, *, name=None):  # noqa: A001 - the decorator's name in the API
    if fn is None:
        return lambda f: Callable(f, name)
    return Callable(fn, name)


# exceptions raised inside callbacks of the current run, chained onto the run's error
_CB_EXC = []


def _cb_failed(what, e):
    # the failed callback's frames are done: drop their locals (the views of its arguments,
    # which would keep the worker's memory until the exception goes)
    traceback.clear_frames(e.__traceback__)
    if len(_CB_EXC) < 8:
        _CB_EXC.append(e)
    if isinstance(e, Error) and e.status is not None:
        st = e.status
    else:
        st = lib.PX_EKERNEL
    msg = "%s raised %s: %s" % (what, type(e).__name__, e)
    return lib.pxpy_set_error(st, msg.encode("utf-8", "replace"))


def _unpack(args, comm_last=False):
    """The Python values of a kernel's (or host task's) px_task_args."""
    out = []
    keep = None
    n = args.n
    for i in range(n):
        a = args.a[i]
        tag = a.tag
        if tag == lib.PX_TAG_SCALAR:
            k = a.scalar_kind
            if comm_last and i == n - 1:
                c = lib.px_arg_comm(args, i)
                if c == ffi.NULL:
                    raise error_from(lib.PX_EINVAL, "the kernel's communicator")
                out.append(Comm(c))
            elif k == lib.PX_SCALAR_F64:
                out.append(a.v.f64)
            elif k == lib.PX_SCALAR_I64:
                out.append(a.v.i64)
            else:
                out.append(a.v.u64)
        else:
            if keep is None:
                keep = _keep_now()
            out.append(_view(a.v.t, writeable=tag != lib.PX_TAG_IN, keep=keep))
    return out


@ffi.def_extern()
def pxpy_kernel_cb(slot, ctx, args):
    k = _KSLOTS.get(slot)
    if k is None:  # cannot happen while a worker holds the kernel; never crash on it
        return lib.pxpy_set_error(lib.PX_EKERNEL, b"python kernel slot %d has no kernel "
                                  b"(collected while registered?): keep the kernel alive"
                                  % slot)
    try:
        k.fn(*_unpack(args, k.comm))
        return 0
    except BaseException as e:  # noqa: B902 - every exception fails the task, never escapes
        return _cb_failed("python kernel %s" % k.name, e)


@ffi.def_extern()
def pxpy_host_cb(args, user):
    fn = ffi.from_handle(user)
    try:
        fn(*_unpack(args))
        return 0
    except BaseException as e:  # noqa: B902
        return _cb_failed("python host task %s" % getattr(fn, "__qualname__", fn), e)


@ffi.def_extern()
def pxpy_callable_cb(slot, o, args):
    c = _CSLOTS.get(slot)
    if c is None:
        return lib.pxpy_set_error(lib.PX_EKERNEL, b"python callable slot %d has no callable "
                                  b"(collected while registered?): keep it alive" % slot)
    orch = Orchestration(None, o, chip=True)
    try:
        vals = []
        for i in range(args.n):
            a = args.a[i]
            if a.tag == lib.PX_TAG_SCALAR:
                vals.append(_unpack_scalar(args, i))
            else:
                t = ffi.new("px_tensor *", a.v.t)
                vals.append(DeviceTensor(t, orch, 0))
        c.fn(orch, *vals)
        return 0
    except BaseException as e:  # noqa: B902
        return _cb_failed("python callable %s" % c.name, e)
    finally:
        orch._closed = True


def _unpack_scalar(args, i):
    a = args.a[i]
    if a.scalar_kind == lib.PX_SCALAR_F64:
        return a.v.f64
    if a.scalar_kind == lib.PX_SCALAR_I64:
        return a.v.i64
    return a.v.u64


@ffi.def_extern()
def pxpy_orch_cb(o, args, user):
    orch = ffi.from_handle(user)
    orch._o = o
    orch._sub.o = o
    try:
        orch._fn(orch)
        orch._finish()
        return 0
    except BaseException as e:  # noqa: B902
        orch._exc = e
        return _cb_failed("the Python orchestration", e)
    finally:
        orch._closed = True


# ---- orchestration ----

def _root_array(arr):
    """The C-contiguous numpy array that owns the memory arr views (arr's base chain), when
    it is another, larger array; else None."""
    root = arr
    while isinstance(root.base, np.ndarray):
        root = root.base
    if root is arr or not root.flags.c_contiguous or root.nbytes <= arr.nbytes:
        return None
    return root


class _Stage:
    __slots__ = ("arr", "t", "lo", "hi", "written", "depth", "parent", "in_place", "what")

    def __init__(self, arr, t, lo, hi, depth, parent=None, in_place=False, what=None):
        self.arr, self.t, self.lo, self.hi = arr, t, lo, hi
        self.what = what  # the argument that used it first
        self.written = False
        self.depth = depth
        self.parent = parent
        self.in_place = in_place  # the tasks use the host bytes themselves (px_tensor_host)


class _Scope:
    def __init__(self, o):
        self._o = o

    def __enter__(self):
        self._o._scope_begin()
        return self._o

    def __exit__(self, et, ev, tb):
        self._o._scope_end(et is None)
        return False


class Orchestration:
    """The o of w.run(fn): fn(o) submits tasks; dependencies are inferred from the bytes.

    Host numpy arrays passed to submit are used in place where the chip's kernels can reach
    host memory (a level-2 worker whose profile maps ordinary host pages: px_tensor_host);
    otherwise they are staged: the first use in a run copies the array into device memory (a
    px_tensor_alloc of the current scope), every later use of the same array (or of a
    contiguous view inside it) refers to that copy, and arrays that a task writes are copied
    back by a task at the end of their scope (the run's end for arrays first used outside
    any o.scope()). Either way the host array holds the results when w.run returns; do not
    read or write it while the run is going. Worker(host_arrays=) chooses; the run result
    says which way each array went (RunResult.host_arrays)."""

    def __init__(self, worker, o=None, fn=None, chip=False):
        self._w = worker
        self._o = o
        self._fn = fn
        self._chip = chip
        self._closed = False
        self._exc = None
        self._scopes = [0]    # ids of the open scopes, innermost last (0: the run's own)
        self._next_scope = 1
        self._dead_scopes = set()
        self._stages = {}   # id(array) -> _Stage
        self._ranges = []   # the _Stage of each distinct staged memory range
        self._in_place = [] # the _Stage of each host array used in place
        self._host_counts = {"in_place": 0, "staged": 0}
        self._host_reason = None  # why host arrays of this run were staged, if they were
        self._pending = []  # (lo, hi, task id) of copy-backs submitted
        self._handles = []  # host task handles kept alive for the run
        self._domains = []
        self._sub = ffi.new("pxpy_sub *")
        self._sub.o = o if o is not None else ffi.NULL
        self._args = ffi.addressof(self._sub, "a")
        self._ts = self._sub.ts
        self._f = self._sub.f
        self._i = self._sub.i
        self._tg = self._sub.tags
        self._tid = ffi.addressof(self._sub, "id")
        self._kid_cache = {} if worker is None else worker._kids

    # -- state --
    def _live(self):
        if self._closed or self._o is None:
            raise StateError("this orchestration has returned: submit only inside the function "
                             "w.run called, while it runs")
        return self._o

    def _dead(self, scope):
        return self._closed or scope in self._dead_scopes

    @property
    def level(self):
        if self._chip:
            return 2
        return self._w.level

    @property
    def chips(self):
        return lib.px_worker_chips(lib.px_orch_worker(self._live()))

    # -- tensors --
    def alloc(self, shape, dtype=np.float32):
        """A device tensor owned by the current scope (uninitialised)."""
        o = self._live()
        shape = (shape,) if isinstance(shape, int) else tuple(int(s) for s in shape)
        if not 1 <= len(shape) <= lib.PX_MAX_DIMS:
            raise InvalidArgument("o.alloc: shape %r has %d dimensions; plexus tensors have 1.."
                                  "%d" % (shape, len(shape), lib.PX_MAX_DIMS))
        t = ffi.new("px_tensor *")
        check(lib.px_tensor_alloc(o, px_dtype(dtype), len(shape), ffi.new("int64_t[]", shape),
                                  t), "o.alloc")
        return DeviceTensor(t, self, self._scopes[-1])

    def _tensor(self, x, tag, what):
        """The px_tensor * for argument x of a submit."""
        if type(x) is np.ndarray:
            s = self._stages.get(id(x))
            if s is not None and s.arr is x:
                if tag in _WRITES:
                    self._written(s)
                return s.t
        elif isinstance(x, DeviceTensor):
            return x._live()
        return self._stage(x, tag, what)

    def _written(self, s):
        if not s.arr.flags.writeable:
            raise InvalidArgument("a task writes a read-only array (%s %s); pass a writeable "
                                  "array (arr.copy())" % (s.arr.dtype, s.arr.shape))
        s.written = True
        while s.parent is not None:
            s = s.parent
            s.written = True

    def _stage(self, x, tag, what):
        arr = _as_array(x, what)
        if self._chip:
            raise InvalidArgument(
                "%s: a host array inside a chip's callable is this process's private copy; "
                "pass host data through the callable's arguments (o.submit_next_level)" % what)
        dt = px_dtype(arr.dtype)
        if arr.ndim == 0:
            arr = arr.reshape(1)
        if arr.ndim > lib.PX_MAX_DIMS:
            raise InvalidArgument("%s has %d dimensions; plexus tensors have at most %d"
                                  % (what, arr.ndim, lib.PX_MAX_DIMS))
        if not arr.flags.c_contiguous:
            raise InvalidArgument(
                "%s is not C-contiguous (strides %s for shape %s): plexus stages host arrays "
                "as contiguous copies and a strided view would lose its layout; pass "
                "np.ascontiguousarray(x) and copy results back yourself, or submit the whole "
                "array" % (what, arr.strides, arr.shape))
        if arr.size == 0:
            raise InvalidArgument("%s is empty (shape %s); a task needs at least one element"
                                  % (what, arr.shape))
        lo = arr.__array_interface__["data"][0]
        hi = lo + arr.nbytes
        if self._may_use_in_place(lo, hi):
            st = self._use_in_place(x, arr, dt, lo, hi, tag, what)
            if st is not None:
                return st
        for s in self._in_place:
            if lo < s.hi and s.lo < hi:
                raise InvalidArgument(
                    "%s (bytes %#x..%#x) overlaps both a host array this run uses in place "
                    "(%#x..%#x) and one it staged; the same bytes cannot be used both ways in "
                    "a run: pass the enclosing array first, or host_arrays='copy'"
                    % (what, lo, hi, s.lo, s.hi))
        for s in self._ranges:
            if lo >= s.lo and hi <= s.hi and (lo != s.lo or hi != s.hi or s.arr.dtype != arr.dtype
                                                or s.arr.shape != arr.shape):
                return self._subview(s, arr, dt, lo, tag, what)
            if lo == s.lo and hi == s.hi:
                st = _Stage(arr, s.t, lo, hi, s.depth, s)
                break
            if lo < s.hi and s.lo < hi:
                raise InvalidArgument(
                    "%s (bytes %#x..%#x) overlaps a host array used earlier in this run, by "
                    "%s (%#x..%#x), without lying inside it; plexus keeps one device copy "
                    "per host array: pass the enclosing array first (then views inside it), "
                    "or copy one of them; inside one task an input and an output may only "
                    "overlap as exactly the same view" % (what, lo, hi, s.what, s.lo, s.hi))
        else:
            o = self._live()
            t = ffi.new("px_tensor *")
            shape = arr.shape
            check(lib.px_tensor_alloc(o, dt, len(shape), ffi.new("int64_t[]", shape), t),
                  "staging %s (%d bytes) in device memory" % (what, arr.nbytes))
            dep = [p[2] for p in self._pending if lo < p[1] and p[0] < hi]
            if dep:
                self._copy_task(t, lo, 1, dep)
            else:
                ffi.memmove(lib.px_tensor_data(t), ffi.from_buffer(arr), arr.nbytes)
            st = _Stage(arr, t, lo, hi, self._scopes[-1], what=what)
            self._ranges.append(st)
            self._host_counts["staged"] += 1
        return self._keep(x, arr, st, tag)

    def _keep(self, x, arr, st, tag):
        """Remembers st for arr (and for x, the object given, when arr is its array view)
        for the rest of the run; marks it written for a writing tag. Returns its tensor."""
        self._stages[id(arr)] = st
        if arr is not x and type(x) is np.ndarray:
            self._stages[id(x)] = st
        if tag in _WRITES:
            self._written(st)
        return st.t

    def _may_use_in_place(self, lo, hi):
        """1 when an array at [lo, hi) should be tried in place: the worker allows it, and
        its bytes meet no staged array of this run (nor a pending copy-back of one), whose
        device copy and host bytes differ until the copy-back."""
        mode = self._w.host_arrays if self._w is not None else "copy"
        if mode == "copy":
            return False
        if self.level != 2 or self._w.level != 2:
            if self._host_reason is None:
                self._host_reason = ("the chips of a level-3 worker are other processes: host "
                                     "arrays are copied to them")
            return False
        return not any(lo < s.hi and s.lo < hi for s in self._ranges) and \
            not any(lo < p[1] and p[0] < hi for p in self._pending)

    def _use_in_place(self, x, arr, dt, lo, hi, tag, what):
        """The px_tensor * over arr's own bytes (px_tensor_host), or None when the device
        cannot take them and the worker allows staging (the reason is kept and logged)."""
        o = self._live()
        t = ffi.new("px_tensor *")
        shape = arr.shape
        root = _root_array(arr)
        st = 0
        if root is not None:  # the whole buffer at once: its other views need no range
            rlo = root.__array_interface__["data"][0]
            st = lib.px_tensor_host(o, ffi.cast("void *", rlo), lib.PX_U8, 1,
                                    ffi.new("int64_t[]", [root.nbytes]), t)
        if st == 0:
            st = lib.px_tensor_host(o, ffi.cast("void *", lo), dt, len(shape),
                                    ffi.new("int64_t[]", shape), t)
        if st != 0:
            err = error_from(st, "using %s in place" % what)
            if self._w.host_arrays == "in_place" or \
                    st not in (lib.PX_ENOTSUP, lib.PX_ENOMEM):
                raise err
            if any(lo < s.hi and s.lo < hi for s in self._in_place):
                raise InvalidArgument(
                    "%s (bytes %#x..%#x) overlaps a host array this run uses in place but "
                    "cannot be used in place itself (%s); pass the enclosing array, or fewer "
                    "distinct arrays" % (what, lo, hi, err))
            if self._host_reason is None:
                self._host_reason = str(err)
                _log.info("plexus: host arrays of this run are staged (copied in and out): "
                          "%s", err)
            return None
        s = _Stage(arr, t, lo, hi, 0, in_place=True)
        self._in_place.append(s)
        self._w._mem.pinned.append(root if root is not None else arr)
        self._host_counts["in_place"] += 1
        return self._keep(x, arr, s, tag)

    def _subview(self, s, arr, dt, lo, tag, what):
        item = arr.itemsize
        if s.arr.dtype != arr.dtype or (lo - s.lo) % item:
            raise InvalidArgument("%s is a view of a host array used earlier in this run with "
                                  "another dtype or alignment (%s vs %s); use one dtype per "
                                  "array in a run" % (what, arr.dtype, s.arr.dtype))
        t = ffi.new("px_tensor *")
        check(lib.px_tensor_view(s.t, arr.ndim, ffi.new("int64_t[]", arr.shape), ffi.NULL,
                                 (lo - s.lo) // item, t), what)
        st = _Stage(arr, t, lo, lo + arr.nbytes, s.depth, s)
        self._stages[id(arr)] = st
        if tag in _WRITES:
            self._written(st)
        return t

    def _copy_task(self, t, host, direction, deps=()):
        o = self._live()
        a = self._args
        lib.px_args_init(a)
        (lib.px_args_out if direction else lib.px_args_in)(a, t)
        lib.px_args_scalar_u64(a, host)
        lib.px_args_scalar_u64(a, direction)
        if self.level == 3:
            check(lib.px_submit_host(o, ffi.addressof(lib, "pxpy_copy_host"), a, ffi.NULL,
                                     self._tid), "copying a host array")
            return self._tid[0]
        kid = self._w._copy_kernel_id()
        if deps:
            d = ffi.new("px_task_id[]", deps)
            check(lib.px_submit_after(o, kid, a, d, len(deps), self._tid), "copying a host array")
        else:
            check(lib.px_submit(o, kid, a, self._tid), "copying a host array")
        return self._tid[0]

    def _copy_back(self, depth):
        keep = []
        for s in self._ranges:
            if s.depth != depth:
                keep.append(s)
                continue
            if s.written:
                tid = self._copy_task(s.t, s.lo, 0)
                self._pending.append((s.lo, s.hi, tid))
        self._ranges = keep
        self._stages = {k: v for k, v in self._stages.items() if v.depth != depth}

    def _finish(self):
        self._copy_back(0)

    # -- scopes --
    def scope(self):
        """with o.scope(): memory allocated inside (o.alloc, staged arrays) lives until the
        scope ends and every task using it has finished."""
        return _Scope(self)

    def _scope_begin(self):
        check(lib.px_scope_begin(self._live()), "o.scope")
        self._scopes.append(self._next_scope)
        self._next_scope += 1

    def _scope_end(self, ok):
        o = self._live()
        sid = self._scopes.pop()
        if ok:
            self._copy_back(sid)
        self._dead_scopes.add(sid)
        check(lib.px_scope_end(o), "end of o.scope")

    # -- submits --
    def _build(self, inputs, outputs, inouts, scalars, args, what):
        ts, f, iv, tg = self._ts, self._f, self._i, self._tg
        tags = bytearray()
        if args is not None:
            items = []
            for x in args:
                if isinstance(x, _Arg):
                    items.append((x.tag, x.x))
                elif isinstance(x, (np.ndarray, DeviceTensor)):
                    raise InvalidArgument("%s: args= item %d is a tensor without a tag; wrap it "
                                          "as plexus.In(x), Out(x), InOut(x) or NoDep(x)"
                                          % (what, len(items)))
                else:
                    items.append((None, x))
        else:
            items = [(lib.PX_TAG_IN, x) for x in inputs]
            items += [(lib.PX_TAG_OUT, x) for x in outputs]
            items += [(lib.PX_TAG_INOUT, x) for x in inouts]
            items += [(None, x) for x in scalars]
        if len(items) > lib.PX_MAX_ARGS:
            raise InvalidArgument("%s: %d arguments; a task has at most %d"
                                  % (what, len(items), lib.PX_MAX_ARGS))
        for n, (tag, x) in enumerate(items):
            if tag is None:
                if isinstance(x, bool) or x is None:
                    raise InvalidArgument("%s: scalar argument %d is %r; pass an int or a float"
                                          % (what, n, x))
                if isinstance(x, U64):
                    iv[n] = x.v - (1 << 64) if x.v >= 1 << 63 else x.v
                    tags.append(_SC_U64)
                elif isinstance(x, (float, np.floating)):
                    f[n] = x
                    tags.append(_SC_F64)
                elif isinstance(x, (int, np.integer)):
                    if not -(1 << 63) <= int(x) < 1 << 63:
                        raise InvalidArgument("%s: scalar %d does not fit int64; use "
                                              "plexus.U64 for unsigned values" % (what, x))
                    iv[n] = int(x)
                    tags.append(_SC_I64)
                else:
                    raise InvalidArgument("%s: scalar argument %d is a %s; pass an int, a "
                                          "float or plexus.U64" % (what, n, type(x).__name__))
            else:
                ts[n] = self._tensor(x, tag, "%s argument %d" % (what, n))
                tags.append(tag)
        for n, t in enumerate(tags):
            tg[n] = t
        return len(items), tg

    def submit(self, kernel, inputs=(), outputs=(), inouts=(), scalars=(), *, args=None,
               after=None, domain=None):
        """Submits a task of kernel (a CKernel or a @plexus.kernel). Arguments in the order
        inputs, outputs, inouts, scalars; or any order with args=[In(a), 2.0, Out(b)].
        after: task ids it must also wait for. domain: appended last (a communicator for a
        comm=True Python kernel). Returns the task id."""
        if args is None and domain is None and after is None and not self._closed:
            # the fast path: arrays already staged in this run (or device tensors), int and
            # float scalars; anything else breaks out to the checking path below, which
            # also words every refusal
            kid = self._kid_cache.get(kernel)
            if kid is not None:
                stages, ts, tg = self._stages, self._ts, self._tg
                n = 0
                try:
                    for x in inputs:
                        s = stages.get(id(x))
                        if s is not None and s.arr is x:
                            ts[n] = s.t
                        elif type(x) is DeviceTensor:
                            ts[n] = x._live()
                        else:
                            raise _Slow
                        tg[n] = _IN
                        n += 1
                    for x in outputs:
                        s = stages.get(id(x))
                        if s is not None and s.arr is x and s.written:
                            ts[n] = s.t
                        elif type(x) is DeviceTensor:
                            ts[n] = x._live()
                        else:
                            raise _Slow
                        tg[n] = _OUT
                        n += 1
                    for x in inouts:
                        s = stages.get(id(x))
                        if s is not None and s.arr is x and s.written:
                            ts[n] = s.t
                        elif type(x) is DeviceTensor:
                            ts[n] = x._live()
                        else:
                            raise _Slow
                        tg[n] = _INOUT
                        n += 1
                    for v in scalars:
                        tv = type(v)
                        if tv is int:
                            self._i[n] = v
                            tg[n] = _SC_I64
                        elif tv is float:
                            self._f[n] = v
                            tg[n] = _SC_F64
                        else:
                            raise _Slow
                        n += 1
                except (_Slow, IndexError, OverflowError):
                    pass  # the checking path says what is wrong, or takes the slow way
                else:
                    st = lib.pxpy_submit_sub(self._sub, kid, n)
                    if st:
                        raise error_from(st, "o.submit")
                    return self._tid[0]
        o = self._live()
        kid = self._kernel_id(kernel)
        if domain is not None and not hasattr(domain, "_live"):
            # inside a chip's callable: the domain scalar of its arguments, passed on
            if isinstance(domain, bool) or not isinstance(domain, (int, np.integer)):
                raise InvalidArgument("submit: domain=%r is neither a plexus.Domain nor the "
                                      "domain argument a callable received" % (domain,))
            if args is not None:
                args = list(args) + [U64(domain)]
            else:
                scalars = list(scalars) + [U64(domain)]
            domain = None
        n, tags = self._build(inputs, outputs, inouts, scalars, args, "submit")
        if domain is not None:
            return self._submit_domain_arg(o, kid, n, tags, domain, after)
        if after is not None and len(after) > 0:
            check(lib.pxpy_build(self._args, n, tags, self._ts, self._f, self._i), "submit")
            d = _after_ids(after, "o.submit")
            check(lib.px_submit_after(o, kid, self._args, d, len(d), self._tid), "o.submit")
            return self._tid[0]
        st = lib.pxpy_submit(o, kid, self._args, n, tags, self._ts, self._f, self._i, self._tid)
        if st:
            raise error_from(st, "o.submit")
        return self._tid[0]

    def _submit_domain_arg(self, o, kid, n, tags, domain, after):
        check(lib.pxpy_build(self._args, n, tags, self._ts, self._f, self._i), "submit")
        check(lib.px_args_domain(self._args, domain._live()), "submit with a domain")
        d = _after_ids(after if after is not None else (), "o.submit")
        check(lib.px_submit_after(o, kid, self._args, d, len(d), self._tid), "submit")
        return self._tid[0]

    def submit_many(self, kernel: object, inputs: Sequence[object] = (),
                    outputs: Sequence[object] = (), inouts: Sequence[object] = (),
                    scalars: Sequence[object] = (), *, n: Optional[int] = None,
                    after: Optional[Sequence[int]] = None) -> np.ndarray:
        """Submits n tasks of kernel in one C call (px_submit_batch); returns their ids
        (a numpy uint64 array, in submission order).

        Each argument, in the order inputs, outputs, inouts, scalars, is the same for every
        task or one per task. A tensor argument is one array (or device tensor) for every
        task, a list or tuple of n of them, or plexus.Pick(tensors, index) (task i takes
        tensors[index[i]]). A scalar argument is one int, float or plexus.U64 for every
        task, or a 1-D sequence of n numbers (a numpy array: int arrays are passed as i64,
        uint64 as u64, float as f64). n is the length of the per-task arguments (give it
        when every argument is the same for all tasks). after: task ids every task waits for.

        Task i is exactly the task o.submit would submit with task i's arguments, after the
        tasks before it: dependencies are inferred from its bytes, each task is checked. A
        failing task raises the plexus.Error of its status, naming the task's index; the
        tasks before it stay submitted (the exception's .index is the failing task's index,
        .submitted the ids of the tasks submitted)."""
        o = self._live()
        kid = self._kernel_id(kernel)
        what = "submit_many of %s" % getattr(kernel, "name", kernel)
        items = [(_IN, x) for x in inputs] + [(_OUT, x) for x in outputs]
        items += [(_INOUT, x) for x in inouts] + [(None, x) for x in scalars]
        if len(items) > lib.PX_MAX_ARGS:
            raise InvalidArgument("%s: %d arguments; a task has at most %d"
                                  % (what, len(items), lib.PX_MAX_ARGS))
        cols = [_batch_column(tag, x, "%s argument %d" % (what, j))
                for j, (tag, x) in enumerate(items)]
        n = _batch_count(cols, n, what)
        try:
            ids = np.empty(n, np.uint64)
        except (MemoryError, ValueError):
            raise OutOfMemory("%s: n=%d tasks need %.3g GiB for their ids in this process; "
                              "submit them in several calls of fewer tasks (a million ids "
                              "take 8 MB)" % (what, n, n * 8 / 2 ** 30)) from None
        if n == 0:
            return ids
        b = ffi.new("px_batch_arg[]", max(len(cols), 1))
        keep = []
        for j, ((tag, _), col) in enumerate(zip(items, cols)):
            self._batch_arg(b[j], tag, col, "%s argument %d" % (what, j), keep)
        deps, ndeps = ffi.NULL, 0
        if after is not None and len(after) > 0:
            deps = _after_ids(after, what)
            ndeps = len(deps)
        done = ffi.new("int64_t *")
        st = lib.px_submit_batch(o, kid, b, len(cols), deps, ndeps, n,
                                 ffi.from_buffer("px_task_id[]", ids), done)
        if st:
            err = error_from(st, what)
            err.index = done[0]
            err.submitted = ids[:done[0]].copy()
            raise err
        return ids

    def _batch_arg(self, b: object, tag: Optional[int], col: "_Column", what: str,
                   keep: list) -> None:
        """Fills px_batch_arg b from col (staging its tensors); keep holds what b points to."""
        b.count = len(col.table)
        b.step = 0 if col.tasks is None else 1
        if tag is None:
            b.tag = lib.PX_TAG_SCALAR
            b.scalar_kind = col.kind
            buf = ffi.from_buffer(col.table)
            b.values = buf
        else:
            b.tag = tag
            buf = ffi.new("px_tensor[]", len(col.table))
            for e, x in enumerate(col.table):
                buf[e] = self._tensor(x, tag, "%s entry %d" % (what, e))[0]
            b.tensors = buf
            if col.index is not None:
                idx = ffi.from_buffer("int64_t[]", col.index)
                keep.append(idx)
                b.index = idx
        keep.append(buf)

    def _kernel_id(self, k):
        if self._w is not None:
            return self._w._kernel_id(k)
        # inside a chip: the kernels were registered on the level-3 worker before its chips
        # were forked, in the same order on every chip
        kid = ffi.new("px_kernel_id *")
        if not isinstance(k, (CKernel, PyKernel)):
            raise InvalidArgument("submit: %r is not a kernel (w.load_kernels(...).name, "
                                  "plexus.builtin(w).name or a @plexus.kernel)" % (k,))
        check(lib.px_kernel_lookup(lib.px_orch_worker(self._live()), k.name.encode(), kid),
              "kernel %s inside a chip: register it on the level-3 worker before its first "
              "run (w.register(k))" % k.name)
        return kid[0]

    # -- level 3 --
    def _l3(self, what):
        if self.level != 3:
            raise StateError("%s needs a level-3 worker (plexus.Worker(level=3, chips=N))"
                             % what)
        return self._live()

    def submit_next_level(self, c, chip, inputs=(), outputs=(), inouts=(), scalars=(), *,
                          args=None):
        """Runs callable c (a @plexus.callable or a C callable) on chip `chip` (an index)."""
        o = self._l3("o.submit_next_level")
        cid = self._w._callable_id(c)
        n, tags = self._build(inputs, outputs, inouts, scalars, args, "submit_next_level")
        check(lib.pxpy_build(self._args, n, tags, self._ts, self._f, self._i))
        check(lib.px_submit_next_level(o, cid, self._args, int(chip), self._tid),
              "submit_next_level of %s on chip %s" % (c.name, chip))
        return self._tid[0]

    def submit_group(self, c, chips, per_chip):
        """Runs callable c on every chip of chips at once; per_chip[i] is a dict of
        inputs/outputs/inouts/scalars/args for chips[i]."""
        o = self._l3("o.submit_group")
        cid = self._w._callable_id(c)
        chips = [int(x) for x in chips]
        if len(per_chip) != len(chips):
            raise InvalidArgument("submit_group: %d chips but %d per_chip argument sets"
                                  % (len(chips), len(per_chip)))
        arr = ffi.new("px_task_args[]", len(chips))
        for i, kw in enumerate(per_chip):
            n, tags = self._build(kw.get("inputs", ()), kw.get("outputs", ()),
                                  kw.get("inouts", ()), kw.get("scalars", ()), kw.get("args"),
                                  "submit_group chip %d" % chips[i])
            check(lib.pxpy_build(arr + i, n, tags, self._ts, self._f, self._i))
        check(lib.px_submit_group(o, cid, arr, ffi.new("int[]", chips), len(chips), self._tid),
              "submit_group of %s" % c.name)
        return self._tid[0]

    def submit_host(self, fn, inputs=(), outputs=(), inouts=(), scalars=(), *, args=None):
        """Runs Python function fn(*views) on a host core thread (level 3)."""
        o = self._l3("o.submit_host")
        n, tags = self._build(inputs, outputs, inouts, scalars, args, "submit_host")
        check(lib.pxpy_build(self._args, n, tags, self._ts, self._f, self._i))
        h = ffi.new_handle(fn)
        self._handles.append(h)
        check(lib.px_submit_host(o, lib.pxpy_host_cb, self._args, h, self._tid), "submit_host")
        return self._tid[0]

    # -- domains (level 3) --
    def domain(self, name, chips, window, buffers, signals=0, need_peer_ptr=False):
        """with o.domain("tp", chips=[0, 1], window=1 << 20, buffers={"grad": 4096}) as d:
        a communication domain over chips (rank r is chips[r]); buffers maps names to bytes
        (in order). Released when the with block ends."""
        from .domain import Domain
        d = Domain(self, name, chips, window, buffers, signals, need_peer_ptr)
        self._domains.append(d)
        return d

    def _coll(self, what, fn, d, *a):
        o = self._l3(what)
        check(fn(o, d._live(), *a, self._tid), what)
        return self._tid[0]

    def allreduce(self, d, buffer, count, dtype=np.float32, op="sum"):
        return self._coll("o.allreduce", lib.px_submit_allreduce, d, buffer.encode(), count, px_dtype(dtype),
                          _redop(op))

    def allgather(self, d, buffer, count, dtype=np.float32):
        return self._coll("o.allgather", lib.px_submit_allgather, d, buffer.encode(), count, px_dtype(dtype))

    def reduce_scatter(self, d, buffer, count, dtype=np.float32, op="sum"):
        return self._coll("o.reduce_scatter", lib.px_submit_reduce_scatter, d, buffer.encode(), count,
                          px_dtype(dtype), _redop(op))

    def broadcast(self, d, buffer, count, dtype=np.float32, root=0):
        return self._coll("o.broadcast", lib.px_submit_broadcast, d, buffer.encode(), count, px_dtype(dtype),
                          int(root))

    def alltoall(self, d, buffer, count, dtype=np.float32):
        return self._coll("o.alltoall", lib.px_submit_alltoall, d, buffer.encode(), count, px_dtype(dtype))

    def write(self, d, rank, buffer, src, offset=0):
        """Copies host array src into rank's buffer (a task; dependencies inferred)."""
        o = self._l3("o.write")
        t = self._tensor(src, lib.PX_TAG_IN, "o.write source")
        check(lib.px_submit_domain_write(o, d._live(), int(rank), buffer.encode(), offset, t,
                                         self._tid), "o.write")
        return self._tid[0]

    def read(self, d, rank, buffer, dst, offset=0):
        """Copies rank's buffer bytes at offset into host array dst (a task)."""
        o = self._l3("o.read")
        t = self._tensor(dst, lib.PX_TAG_OUT, "o.read destination")
        check(lib.px_submit_domain_read(o, d._live(), int(rank), buffer.encode(), offset, t,
                                        self._tid), "o.read")
        return self._tid[0]

    def submit_domain(self, d, c, per_rank=None):
        """A group task of callable c on every member: rank r gets per_rank[r]'s args (a
        dict as in submit_group) followed by the domain."""
        o = self._l3("o.submit_domain")
        cid = self._w._callable_id(c)
        pr = ffi.NULL
        if per_rank is not None:
            size = d.size
            if len(per_rank) != size:
                raise InvalidArgument("submit_domain: %d per_rank sets for %d ranks"
                                      % (len(per_rank), size))
            pr = ffi.new("px_task_args[]", size)
            for i, kw in enumerate(per_rank):
                n, tags = self._build(kw.get("inputs", ()), kw.get("outputs", ()),
                                      kw.get("inouts", ()), kw.get("scalars", ()),
                                      kw.get("args"), "submit_domain rank %d" % i)
                check(lib.pxpy_build(pr + i, n, tags, self._ts, self._f, self._i))
        check(lib.px_submit_domain_task(o, d._live(), cid, pr, self._tid), "submit_domain")
        return self._tid[0]


class _Column:
    """One argument of a submit_many: its table (tensors, or a numpy array of scalars of
    kind), the index array picking a table entry per task (tensors only), and the number of
    tasks it describes (None: the same entry for every task)."""

    __slots__ = ("kind", "table", "index", "tasks")

    def __init__(self, table: object, kind: Optional[int] = None,
                 index: Optional[np.ndarray] = None, tasks: Optional[int] = None) -> None:
        self.kind, self.table, self.index, self.tasks = kind, table, index, tasks


def _batch_column(tag: Optional[int], x: object, what: str) -> _Column:
    """Argument x of a submit_many (a tensor argument when tag is not None) as a _Column."""
    if tag is not None:
        if isinstance(x, Pick):
            idx = np.asarray(x.index)
            if idx.ndim != 1 or (idx.size and idx.dtype.kind not in "iu"):
                raise InvalidArgument("%s: Pick's index is %s %s; pass a 1-D sequence of "
                                      "integers, one per task" % (what, idx.dtype, idx.shape))
            if not x.tensors:
                raise InvalidArgument("%s: Pick has no tensors to pick from" % what)
            idx = np.ascontiguousarray(idx, dtype=np.int64)
            return _Column(x.tensors, index=idx, tasks=len(idx))
        if isinstance(x, (list, tuple)):
            pos, table, idx = {}, [], []
            for t in x:
                k = pos.get(id(t))
                if k is None:
                    k = pos[id(t)] = len(table)
                    table.append(t)
                idx.append(k)
            if not table:
                raise InvalidArgument("%s: an empty list of tensors (one per task); pass "
                                      "n=0 with one tensor to submit nothing" % what)
            return _Column(table, index=np.array(idx, dtype=np.int64), tasks=len(idx))
        return _Column([x])
    if isinstance(x, (list, tuple, np.ndarray)):
        col = np.asarray(x)
        if col.ndim != 1:
            raise InvalidArgument("%s: a per-task scalar argument is a 1-D sequence, not shape "
                                  "%s" % (what, col.shape))
        if col.dtype.kind == "f":
            kind, dt = lib.PX_SCALAR_F64, np.float64
        elif col.dtype == np.uint64:
            kind, dt = lib.PX_SCALAR_U64, np.uint64
        elif col.dtype.kind in "iu" or col.size == 0:
            kind, dt = lib.PX_SCALAR_I64, np.int64
        else:
            raise InvalidArgument("%s: per-task scalars of dtype %s; pass int or float "
                                  "numbers (or plexus.U64 values one by one)" % (what, col.dtype))
        if col.size == 0:
            col = np.zeros(1, dt)  # a table has one entry; no task reads it
            return _Column(col, kind, tasks=0)
        return _Column(np.ascontiguousarray(col, dtype=dt), kind, tasks=len(col))
    if isinstance(x, bool) or x is None:
        raise InvalidArgument("%s: scalar argument is %r; pass an int or a float" % (what, x))
    if isinstance(x, U64):
        return _Column(np.array([x.v], dtype=np.uint64), lib.PX_SCALAR_U64)
    if isinstance(x, (float, np.floating)):
        return _Column(np.array([x], dtype=np.float64), lib.PX_SCALAR_F64)
    if isinstance(x, (int, np.integer)):
        if not -(1 << 63) <= int(x) < 1 << 63:
            raise InvalidArgument("%s: scalar %d does not fit int64; use plexus.U64 for "
                                  "unsigned values" % (what, x))
        return _Column(np.array([x], dtype=np.int64), lib.PX_SCALAR_I64)
    raise InvalidArgument("%s: scalar argument is a %s; pass an int, a float, plexus.U64 or "
                          "a sequence of them, one per task" % (what, type(x).__name__))


def _after_ids(after: Sequence[object], what: str) -> object:
    """after= as a px_task_id[] (task ids o.submit returned), or a clear refusal."""
    ids = []
    for j, x in enumerate(after):
        if isinstance(x, bool) or not isinstance(x, (int, np.integer)) or \
                not 0 <= int(x) < 1 << 64:
            raise InvalidArgument("%s: after= item %d is %r; pass task ids as earlier submits "
                                  "of this run returned them (integers 0 .. 2**64-1)"
                                  % (what, j, x))
        ids.append(int(x))
    return ffi.new("px_task_id[]", ids)


def _batch_count(cols: list, n: Optional[int], what: str) -> int:
    """The number of tasks of a submit_many: n, or the length of its per-task arguments."""
    lens = {c.tasks for c in cols if c.tasks is not None}
    if n is not None:
        if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 0:
            raise InvalidArgument("%s: n=%r; pass the number of tasks (0 or more)" % (what, n))
        lens.add(int(n))
    if len(lens) > 1:
        raise InvalidArgument("%s: the per-task arguments (and n) disagree on the number of "
                              "tasks: %s" % (what, sorted(lens)))
    if not lens:
        raise InvalidArgument("%s: every argument is the same for every task; pass n= (the "
                              "number of tasks)" % what)
    return lens.pop()


_REDOPS = {"sum": lib.PX_OP_SUM, "prod": lib.PX_OP_PROD, "min": lib.PX_OP_MIN,
           "max": lib.PX_OP_MAX}


def _redop(op):
    if op not in _REDOPS:
        raise InvalidArgument("reduction %r is unknown; use one of %s"
                              % (op, ", ".join(_REDOPS)))
    return _REDOPS[op]


class Comm:
    """A kernel's communicator (a comm=True Python kernel's last argument): one-sided calls
    and collectives on numpy views of this rank's window (c.buffer(name, dtype))."""

    def __init__(self, c):
        self._c = c
        self.rank = lib.px_comm_rank(c)
        self.size = lib.px_comm_size(c)
        self.name = ffi.string(lib.px_comm_name(c)).decode()

    def buffer(self, name, dtype=np.uint8, shape=None):
        """A numpy view of this rank's buffer called name."""
        nb = ffi.new("size_t *")
        p = lib.px_comm_buffer(self._c, name.encode(), nb)
        if p == ffi.NULL:
            raise InvalidArgument("domain %r has no buffer %r" % (self.name, name))
        a = np.frombuffer(ffi.buffer(p, nb[0]), dtype=np.dtype(dtype))
        return a if shape is None else a[:int(np.prod(shape))].reshape(shape)

    def transport(self, peer):
        t = lib.px_comm_transport(self._c, int(peer))
        return None if t == ffi.NULL else ffi.string(t).decode()

    def _win(self, a, what):
        a = _as_array(a, what)
        if not a.flags.c_contiguous:
            raise InvalidArgument("%s must be a contiguous view of the window" % what)
        off = ffi.new("size_t *")
        ptr = ffi.cast("void *", a.__array_interface__["data"][0])
        check(lib.px_comm_offset(self._c, ptr, a.nbytes, off), what)
        return a, ptr, off[0]

    def put(self, peer, dst, src):
        """Writes src (host bytes or a window view) into peer's window at dst's offset (dst: a
        view of this rank's window that names the place)."""
        _, _, off = self._win(dst, "put destination")
        s = _as_array(src, "put source")
        check(lib.px_comm_put(self._c, int(peer), off, ffi.from_buffer(s), s.nbytes), "put")

    def get(self, peer, src, dst):
        """Reads peer's window bytes at src's offset into dst."""
        _, _, off = self._win(src, "get source")
        d = _as_array(dst, "get destination")
        check(lib.px_comm_get(self._c, int(peer), off, ffi.from_buffer(d), d.nbytes), "get")

    def signal(self, peer, sig, value=1, op="add"):
        check(lib.px_comm_signal(self._c, int(peer), int(sig), _sigop(op), int(value)),
              "signal")

    def put_signal(self, peer, dst, src, sig, value=1, op="add"):
        _, _, off = self._win(dst, "put_signal destination")
        s = _as_array(src, "put_signal source")
        check(lib.px_comm_put_signal(self._c, int(peer), off, ffi.from_buffer(s), s.nbytes,
                                     int(sig), _sigop(op), int(value)), "put_signal")

    def wait_until(self, sig, cmp, value, timeout=0.0):
        """Waits until signal sig <cmp> value (cmp: "==", "!=", ">", ">=", "<", "<="); raises
        plexus.Timeout after timeout seconds (0: PLEXUS_COMM_TIMEOUT_S)."""
        if cmp not in _CMPS:
            raise InvalidArgument("comparison %r is unknown; use one of %s"
                                  % (cmp, " ".join(_CMPS)))
        check(lib.px_comm_wait_until(self._c, int(sig), _CMPS[cmp], int(value), float(timeout)),
              "wait_until")

    def signal_read(self, sig):
        return lib.px_comm_signal_read(self._c, int(sig))

    def barrier(self):
        check(lib.px_comm_barrier(self._c), "barrier")

    def _buf(self, a, what):
        a, ptr, _ = self._win(a, what)
        return a, ptr, px_dtype(a.dtype)

    def allreduce(self, a, op="sum"):
        a, p, dt = self._buf(a, "allreduce buffer")
        check(lib.px_comm_allreduce(self._c, p, a.size, dt, _redop(op)), "allreduce")

    def allgather(self, a):
        """a holds size blocks; this rank's block is block rank."""
        a, p, dt = self._buf(a, "allgather buffer")
        check(lib.px_comm_allgather(self._c, p, a.size // self.size, dt), "allgather")

    def reduce_scatter(self, a, op="sum"):
        a, p, dt = self._buf(a, "reduce_scatter buffer")
        check(lib.px_comm_reduce_scatter(self._c, p, a.size // self.size, dt, _redop(op)),
              "reduce_scatter")

    def broadcast(self, a, root=0):
        a, p, dt = self._buf(a, "broadcast buffer")
        check(lib.px_comm_broadcast(self._c, p, a.size, dt, int(root)), "broadcast")

    def alltoall(self, a):
        a, p, dt = self._buf(a, "alltoall buffer")
        check(lib.px_comm_alltoall(self._c, p, a.size // self.size, dt), "alltoall")

    def alltoallv(self, send, send_counts, send_offs, recv, recv_counts, recv_offs):
        s, sp, dt = self._buf(send, "alltoallv send")
        r, rp, dt2 = self._buf(recv, "alltoallv recv")
        if dt != dt2:
            raise InvalidArgument("alltoallv: send is %s, recv %s; use one dtype"
                                  % (s.dtype, r.dtype))
        arrs = [ffi.new("size_t[]", [int(v) for v in x])
                for x in (send_counts, send_offs, recv_counts, recv_offs)]
        for x, nm in zip(arrs, ("send_counts", "send_offs", "recv_counts", "recv_offs")):
            if len(x) != self.size:
                raise InvalidArgument("alltoallv: %s has %d entries for %d ranks"
                                      % (nm, len(x), self.size))
        check(lib.px_comm_alltoallv(self._c, sp, arrs[0], arrs[1], rp, arrs[2], arrs[3], dt),
              "alltoallv")

    @property
    def last_algorithm(self):
        return ffi.string(lib.px_comm_last_algorithm(self._c)).decode()


_CMPS = {"==": lib.PX_CMP_EQ, "!=": lib.PX_CMP_NE, ">": lib.PX_CMP_GT, ">=": lib.PX_CMP_GE,
         "<": lib.PX_CMP_LT, "<=": lib.PX_CMP_LE}


def _sigop(op):
    if op == "add":
        return lib.PX_SIG_ADD
    if op == "set":
        return lib.PX_SIG_SET
    raise InvalidArgument("signal op %r is unknown; use \"add\" or \"set\"" % (op,))


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


def new_struct(ctype, ffi=ffi, lib=lib):
    """A zeroed ctype (a struct the API versions, such as px_config or px_domain_spec), with
    any size or version field the headers give it already set the way their initializer
    macro would: size (or struct_size) = sizeof, version = the PX_<TYPE>_VERSION constant.
    So a header that gains such fields needs no change here."""
    p = ffi.new(ctype + " *")
    fields = {f for f, _ in ffi.typeof(ctype).fields}
    for f in ("size", "struct_size"):
        if f in fields:
            setattr(p, f, ffi.sizeof(ctype))
    ver = ctype.upper() + "_VERSION"
    for f in ("version", "abi_version"):
        if f in fields and hasattr(lib, ver):
            setattr(p, f, getattr(lib, ver))
    return p


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
        self._copy_kid = None
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
        return lib.px_worker_cores(self._live())

    @property
    def chips(self):
        return lib.px_worker_chips(self._live())

    @property
    def chip_cores(self):
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

    def _copy_kernel_id(self):
        if self._copy_kid is None:
            idp = ffi.new("px_kernel_id *")
            check(lib.px_kernel_register(self._live(), b"python.copy",
                                         ffi.addressof(lib, "pxpy_copy_kernel"), ffi.NULL, idp),
                  "registering the copy kernel")
            self._copy_kid = idp[0]
        return self._copy_kid

    def init(self):
        """Starts the chips of a level-3 worker (done by the first run otherwise); no-op at
        level 2."""
        w = self._live()
        if self._inited:
            return
        if self.level == 2:
            self._copy_kernel_id()
        check(lib.pxpy_worker_init(w), "starting the worker")
        self._inited = True

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
        try:
            st = lib.px_run(w, lib.pxpy_orch_cb, args, h)
            err = error_from(st) if st else None
        finally:
            self._running = False
            del self._mem.pinned[:]
            for d in orch._domains:
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

