"""plexus.staging - host arrays in a run. One C call, px_tensor_from_host, decides whether an
array is used in place or staged, applies the rules of both, and copies in and back (at
scope ends and at the run's end); this module hands it numpy's description of each array
and remembers, per array object, the tensor it got, for submit's fast path."""
import logging
from typing import Optional

import numpy as np

from ._plexus_cffi import ffi, lib
from .args import _WRITES, _as_array, px_dtype
from .errors import InvalidArgument, error_from
from .tensors import DeviceTensor

_log = logging.getLogger("plexus")

_MODE = {"auto": lib.PX_HOST_AUTO, "in_place": lib.PX_HOST_IN_PLACE, "copy": lib.PX_HOST_COPY}


def _root_array(arr: np.ndarray) -> Optional[np.ndarray]:
    """The C-contiguous numpy array that owns the memory arr views (arr's base chain), when
    it is another, larger array; else None."""
    root = arr
    while isinstance(root.base, np.ndarray):
        root = root.base
    if root is arr or not root.flags.c_contiguous or root.nbytes <= arr.nbytes:
        return None
    return root


def _describe(t: object, arr: np.ndarray, dt: int, what: str) -> None:
    """Fills px_tensor *t with arr's address, dtype, shape and strides (in elements)."""
    item = arr.itemsize
    nd = arr.ndim
    strides = arr.strides
    if not arr.flags.c_contiguous and any(s % item for s in strides):
        raise InvalidArgument("%s has strides %s, not multiples of its element size %d; pass "
                              "np.ascontiguousarray(x)" % (what, strides, item))
    t.addr = ffi.cast("void *", arr.__array_interface__["data"][0])
    t.dtype = dt
    t.ndim = nd
    t.offset = 0
    t.shape[0:nd] = arr.shape
    t.stride[0:nd] = [s // item for s in strides]


class _Stage:
    """What px_tensor_from_host gave one array object: its tensor, whether a writing tag
    was accepted for it, and the scope it is valid in (in place: the whole run)."""

    __slots__ = ("arr", "t", "written", "in_place", "scope")

    def __init__(self, arr: np.ndarray, t: object, written: bool, in_place: bool,
                 scope: int) -> None:
        self.arr, self.t, self.written = arr, t, written
        self.in_place, self.scope = in_place, scope


class _Staging:
    """The host-array half of Orchestration (a mixin: the state lives in Orchestration)."""

    def _tensor(self, x: object, tag: int, what: str) -> object:
        """The px_tensor * for argument x of a submit."""
        if type(x) is np.ndarray:
            s = self._stages.get(id(x))
            if s is not None and s.arr is x and (s.written or tag not in _WRITES):
                return s.t
        elif isinstance(x, DeviceTensor):
            return x._live()
        return self._stage(x, tag, what)

    def _stage(self, x: object, tag: int, what: str) -> object:
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
        h = self._host
        _describe(h[0], arr, dt, what)
        mode = self._host_mode
        root = _root_array(arr) if mode != lib.PX_HOST_COPY else None
        whole = ffi.NULL
        if root is not None:  # registered whole in place: its other views take no range
            whole = h + 1
            whole.addr = ffi.cast("void *", root.__array_interface__["data"][0])
            whole.dtype, whole.ndim, whole.offset = lib.PX_U8, 1, 0
            whole.shape[0], whole.stride[0] = root.nbytes, 1
        if not arr.flags.writeable:
            mode |= lib.PX_HOST_READONLY
        t = ffi.new("px_tensor *")
        st = lib.px_tensor_from_host(self._live(), h, whole, tag, mode, what.encode(), t,
                                     self._how)
        if st:
            raise error_from(st, what)
        old = self._stages.get(id(x))
        if old is not None and old.arr is x:  # met again for a writing tag: now accepted
            old.written = True
            return old.t  # the tensor earlier arguments of this submit may point at
        self._submit_ts.append(t)  # alive until this submit's C call, whatever replaces it
        in_place = self._how[0] == lib.PX_HOST_USED_IN_PLACE
        self._report(self._how[0], root if root is not None else arr)
        s = _Stage(arr, t, tag in _WRITES, in_place, 0 if in_place else self._scopes[-1])
        self._stages[id(arr)] = s
        if arr is not x and type(x) is np.ndarray:
            self._stages[id(x)] = s
        return t

    def _report(self, how: int, pin: np.ndarray) -> None:
        """Reports what px_tensor_from_host did with a new array object (RunResult's
        host_arrays, the plexus logger); keeps an array used in place alive for the run."""
        if how == lib.PX_HOST_USED_IN_PLACE:
            self._host_counts["in_place"] += 1
            self._w._mem.pinned.append(pin)
        elif how == lib.PX_HOST_USED_COPY:
            self._host_counts["staged"] += 1
            if self._host_reason is None:
                r = lib.px_tensor_from_host_reason(self._live())
                if r != ffi.NULL:
                    self._host_reason = ffi.string(r).decode("utf-8", "replace")
                    _log.info("plexus: host arrays of this run are staged (copied in and "
                              "out): %s", self._host_reason)

    def _scope_ended(self, scope: int) -> None:
        """Forgets the tensors of copies made in scope (px_scope_end copied them back)."""
        self._stages = {k: v for k, v in self._stages.items() if v.scope != scope}
