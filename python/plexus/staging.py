"""plexus.staging - host arrays in a run: used in place (px_tensor_host) or staged (copied
into device memory, copied back after the tasks that write them)."""
import logging

import numpy as np

from ._plexus_cffi import ffi, lib
from .args import _WRITES, _as_array, px_dtype
from .errors import InvalidArgument, check, error_from
from .tensors import DeviceTensor

_log = logging.getLogger("plexus")


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


class _Staging:
    """The host-array half of Orchestration (a mixin: the state lives in Orchestration)."""

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
