"""plexus.tensors - numpy views of memory the runtime owns, and device tensors.

A view handed to Python code keeps that memory alive through its base object (_Memory), so
no Python object ever points at memory the runtime has freed."""
import logging
import os
import weakref

import numpy as np

from ._plexus_cffi import ffi, lib
from .args import _NP_OF
from .errors import InvalidArgument, StateError, error_from

_log = logging.getLogger("plexus")


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
