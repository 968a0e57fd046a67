"""plexus.comm - a comm=True Python kernel's communicator: one-sided calls, signals and
collectives on numpy views of this rank's window."""
import numpy as np

from ._plexus_cffi import ffi, lib
from .args import _as_array, px_dtype
from .errors import InvalidArgument, check

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
        """How this rank moves bytes to rank peer ("direct", "staged", ...), or None."""
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
        """Adds value to (op="set": sets) signal sig of rank peer."""
        check(lib.px_comm_signal(self._c, int(peer), int(sig), _sigop(op), int(value)),
              "signal")

    def put_signal(self, peer, dst, src, sig, value=1, op="add"):
        """put, then signal sig of peer once the bytes have landed."""
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
        """The value of this rank's signal sig."""
        return lib.px_comm_signal_read(self._c, int(sig))

    def barrier(self):
        """Waits until every rank of the domain has called barrier."""
        check(lib.px_comm_barrier(self._c), "barrier")

    def _buf(self, a, what):
        a, ptr, _ = self._win(a, what)
        return a, ptr, px_dtype(a.dtype)

    def allreduce(self, a, op="sum"):
        """Reduces a (a view of the window) over the ranks, in place."""
        a, p, dt = self._buf(a, "allreduce buffer")
        check(lib.px_comm_allreduce(self._c, p, a.size, dt, _redop(op)), "allreduce")

    def allgather(self, a):
        """a holds size blocks; this rank's block is block rank."""
        a, p, dt = self._buf(a, "allgather buffer")
        check(lib.px_comm_allgather(self._c, p, a.size // self.size, dt), "allgather")

    def reduce_scatter(self, a, op="sum"):
        """Reduces a over the ranks; rank r keeps the r-th part."""
        a, p, dt = self._buf(a, "reduce_scatter buffer")
        check(lib.px_comm_reduce_scatter(self._c, p, a.size // self.size, dt, _redop(op)),
              "reduce_scatter")

    def broadcast(self, a, root=0):
        """Copies root's a into every rank's a."""
        a, p, dt = self._buf(a, "broadcast buffer")
        check(lib.px_comm_broadcast(self._c, p, a.size, dt, int(root)), "broadcast")

    def alltoall(self, a):
        """Exchanges equal parts of a between every pair of ranks."""
        a, p, dt = self._buf(a, "alltoall buffer")
        check(lib.px_comm_alltoall(self._c, p, a.size // self.size, dt), "alltoall")

    def alltoallv(self, send, send_counts, send_offs, recv, recv_counts, recv_offs):
        """Sends send[send_offs[r]:+send_counts[r]] to rank r, receives into recv likewise."""
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
        """The algorithm the last collective of this communicator used."""
        return ffi.string(lib.px_comm_last_algorithm(self._c)).decode()


_CMPS = {"==": lib.PX_CMP_EQ, "!=": lib.PX_CMP_NE, ">": lib.PX_CMP_GT, ">=": lib.PX_CMP_GE,
         "<": lib.PX_CMP_LT, "<=": lib.PX_CMP_LE}


def _sigop(op):
    if op == "add":
        return lib.PX_SIG_ADD
    if op == "set":
        return lib.PX_SIG_SET
    raise InvalidArgument("signal op %r is unknown; use \"add\" or \"set\"" % (op,))
