"""plexus.args - what a submit takes: dtypes, argument tags, scalars, per-task columns of
o.submit_many, task ids of after=, and the versioned structs of the C API."""
from typing import Optional, Sequence

import numpy as np

from ._plexus_cffi import ffi, lib
from .errors import InvalidArgument

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
    """The numpy dtype of a px_dtype code."""
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
    """An argument read and written by the task (element-wise in place)."""
    tag = lib.PX_TAG_INOUT


class OutputExisting(_Arg):
    """An argument written into memory that must already exist."""
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
