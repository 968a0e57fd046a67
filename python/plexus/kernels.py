"""plexus.kernels - C kernels from shared libraries, Python kernels (@plexus.kernel) and chip
orchestrations (@plexus.callable), each Python one behind a C trampoline slot."""
import os
import threading
import weakref

from ._plexus_cffi import ffi, lib
from .errors import InvalidArgument, NotFound

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
    """Decorator: @plexus.callable or @plexus.callable(name=...)."""
    if fn is None:
        return lambda f: Callable(f, name)
    return Callable(fn, name)
