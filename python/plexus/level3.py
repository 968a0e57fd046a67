"""plexus.level3 - what a level-3 orchestration submits beyond kernels: callables on chips,
groups, host tasks, domains and their collectives."""
import numpy as np

from ._plexus_cffi import ffi, lib
from .args import px_dtype
from .comm import _redop
from .domain import Domain
from .errors import InvalidArgument, StateError, check


class _Level3:
    """The level-3 half of Orchestration (a mixin: the state lives in Orchestration)."""

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
    def domain(self, name, chips, window, buffers, signals=0, need_peer_ptr=False,
               keep=False):
        """with o.domain("tp", chips=[0, 1], window=1 << 20, buffers={"grad": 4096}) as d:
        a communication domain over chips (rank r is chips[r]); buffers maps names to bytes
        (in order). Released when the with block ends. keep=True (without a with block): it
        outlives this run, for the worker's later runs (loop in one, shrink in the next after
        a failure), until d.release(); a run that fails frees the domains it made. Chips
        named with plexus.chip_global (w.job_chips(): every host's, host-major) make a domain
        spanning the hosts of an MPI job: every host allocates it, with the same arguments,
        at the same point."""
        d = Domain(self, name, chips, window, buffers, signals, need_peer_ptr, keep=keep)
        self._domains.append(d)
        return d

    def _coll(self, what, fn, d, *a):
        o = self._l3(what)
        check(fn(o, d._live(), *a, self._tid), what)
        return self._tid[0]

    def allreduce(self, d, buffer, count, dtype=np.float32, op="sum"):
        """A task reducing buffer (count elements) over the ranks of domain d, in place."""
        return self._coll("o.allreduce", lib.px_submit_allreduce, d, buffer.encode(), count,
                          px_dtype(dtype), _redop(op))

    def allgather(self, d, buffer, count, dtype=np.float32):
        """A task gathering every rank's count elements of buffer into every rank's."""
        return self._coll("o.allgather", lib.px_submit_allgather, d, buffer.encode(), count,
                          px_dtype(dtype))

    def reduce_scatter(self, d, buffer, count, dtype=np.float32, op="sum"):
        """A task reducing buffer over the ranks, rank r keeping the r-th part."""
        return self._coll("o.reduce_scatter", lib.px_submit_reduce_scatter, d,
                          buffer.encode(), count, px_dtype(dtype), _redop(op))

    def broadcast(self, d, buffer, count, dtype=np.float32, root=0):
        """A task copying root's buffer into every rank's."""
        return self._coll("o.broadcast", lib.px_submit_broadcast, d, buffer.encode(), count,
                          px_dtype(dtype), int(root))

    def alltoall(self, d, buffer, count, dtype=np.float32):
        """A task exchanging equal parts of buffer between every pair of ranks."""
        return self._coll("o.alltoall", lib.px_submit_alltoall, d, buffer.encode(), count,
                          px_dtype(dtype))

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
