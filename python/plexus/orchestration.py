"""plexus.orchestration - the o of w.run(fn): tasks, scopes and device tensors."""
from typing import Optional, Sequence

import numpy as np

from ._plexus_cffi import ffi, lib
from .args import (_IN, _INOUT, _OUT, _SC_F64, _SC_I64, _SC_U64, U64, _Arg, _Column,
                   _after_ids, _batch_column, _batch_count, _Slow, px_dtype)
from .errors import InvalidArgument, OutOfMemory, StateError, check, error_from
from .kernels import CKernel, PyKernel
from .level3 import _Level3
from .staging import _MODE, _Staging
from .tensors import DeviceTensor

class _Scope:
    def __init__(self, o):
        self._o = o

    def __enter__(self):
        self._o._scope_begin()
        return self._o

    def __exit__(self, et, ev, tb):
        self._o._scope_end(et is None)
        return False


class Orchestration(_Staging, _Level3):
    """The o of w.run(fn): fn(o) submits tasks; dependencies are inferred from the bytes.

    Host numpy arrays passed to submit are used in place where the chip's kernels can reach
    host memory (a level-2 worker whose profile maps ordinary host pages: px_tensor_host);
    otherwise they are staged: the first use in a run copies the array into device memory (a
    px_tensor_alloc of the current scope), every later use of the same array (or of a view
    inside it) refers to that copy, and arrays that a task writes are copied back by a task
    at the end of their scope (the run's end for arrays first used outside any o.scope()).
    The runtime decides and copies (px_tensor_from_host). Either way the host array holds
    the results when w.run returns; do not read or write it while the run is going. Worker(host_arrays=) chooses; the run result
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
        self._stages = {}   # id(array) -> _Stage: what px_tensor_from_host gave it
        self._host = ffi.new("px_tensor[2]")  # an array's description, and its buffer's
        self._how = ffi.new("int *")
        self._submit_ts = []  # the tensors staged for the submit being built
        self._host_mode = _MODE[worker.host_arrays if worker is not None else "copy"]
        self._host_counts = {"in_place": 0, "staged": 0}
        self._host_reason = None  # why host arrays of this run were staged, if they were
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
        """The level of the worker this orchestration runs on (2 inside a chip)."""
        if self._chip:
            return 2
        return self._w.level

    @property
    def chips(self):
        """The number of chips of the worker."""
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
        self._dead_scopes.add(sid)
        self._scope_ended(sid)
        st = lib.px_scope_end(o)  # copies back the arrays staged in the scope
        if st and ok:
            raise error_from(st, "end of o.scope")

    # -- submits --
    def _build(self, inputs, outputs, inouts, scalars, args, what):
        ts, f, iv, tg = self._ts, self._f, self._i, self._tg
        self._submit_ts = []
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
                    # an output must have been marked written before (the checking
                    # path marks it, and refuses a read-only array)
                    for xs, tag, writes in ((inputs, _IN, False), (outputs, _OUT, True),
                                            (inouts, _INOUT, True)):
                        for x in xs:
                            s = stages.get(id(x))
                            if s is not None and s.arr is x and (s.written or not writes):
                                ts[n] = s.t
                            elif type(x) is DeviceTensor:
                                ts[n] = x._live()
                            else:
                                raise _Slow
                            tg[n] = tag
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
