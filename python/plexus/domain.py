"""plexus.domain - communication domains as a level-3 orchestration sees them."""
from ._plexus_cffi import ffi, lib
from .errors import InvalidArgument, StateError, check
from .args import new_struct


class Domain:
    """with o.domain(name, chips=, window=, buffers=, signals=) as d: a domain over chips
    (rank r is chips[r]) with a window of `window` bytes per rank carved into the named
    buffers ({name: bytes}, in order). d.transport(a, b) and d.reason(a, b) say how ranks a
    and b move bytes and why. Released at the end of the with block (or d.release()); its
    memory is freed when the run drains."""

    def __init__(self, orch, name, chips, window, buffers, signals, need_peer_ptr,
                 _handle=None):
        if _handle is not None:  # made by shrink(): the C domain exists already
            self._d = _handle
            self._released = False
            self.name = str(name)
            self.chips = [lib.px_domain_chip(_handle, r) for r in
                          range(lib.px_domain_size(_handle))]
            self.buffers = dict(buffers)
            return
        o = orch._l3("o.domain")
        if isinstance(buffers, dict):
            items = list(buffers.items())
        else:
            items = [tuple(x) for x in buffers]
        self._keep = [ffi.new("char[]", str(n).encode()) for n, _ in items]
        bufs = ffi.new("px_domain_buffer[]", max(len(items), 1))
        for i, (n, b) in enumerate(items):
            if int(b) <= 0:
                raise InvalidArgument("o.domain %r: buffer %r has %r bytes; give each buffer "
                                      "> 0 bytes" % (name, n, b))
            bufs[i].name = self._keep[i]
            bufs[i].bytes = int(b)
        self._chips = ffi.new("int[]", [int(c) for c in chips] or [0])
        self._name = ffi.new("char[]", str(name).encode())
        spec = new_struct("px_domain_spec")
        spec.name = self._name
        spec.chips = self._chips
        spec.nchips = len(chips)
        spec.window_bytes = int(window)
        spec.buffers = bufs
        spec.nbuffers = len(items)
        spec.nsignals = int(signals)
        spec.need_peer_ptr = int(bool(need_peer_ptr))
        self._bufs = bufs
        dp = ffi.new("px_domain **")
        check(lib.px_domain_alloc(o, spec, dp), "o.domain %r" % (name,))
        self._d = dp[0]
        self._released = False
        self.name = str(name)
        self.chips = [int(c) for c in chips]
        self.buffers = dict((str(n), int(b)) for n, b in items)

    def _live(self):
        if self._released:
            raise StateError("domain %r was released; use it inside its with block (and its "
                             "run)" % self.name)
        return self._d

    @property
    def size(self):
        return lib.px_domain_size(self._live())

    def transport(self, a, b):
        """The transport between ranks a and b ("direct", "staged", ...)."""
        t = lib.px_domain_transport(self._live(), int(a), int(b))
        if t == ffi.NULL:
            raise InvalidArgument("domain %r: no ranks %r and %r (it has %d)"
                                  % (self.name, a, b, self.size))
        return ffi.string(t).decode()

    def reason(self, a, b):
        """Why ranks a and b use d.transport(a, b), as the log line says it."""
        t = lib.px_domain_transport_reason(self._live(), int(a), int(b))
        if t == ffi.NULL:
            raise InvalidArgument("domain %r: no ranks %r and %r (it has %d)"
                                  % (self.name, a, b, self.size))
        return ffi.string(t).decode()

    @property
    def generation(self):
        """How many shrinks made this domain (0: o.domain made it)."""
        return lib.px_domain_generation(self._live())

    def chip(self, rank):
        """The chip of rank `rank`."""
        c = lib.px_domain_chip(self._live(), int(rank))
        if c < 0:
            raise InvalidArgument("domain %r: no rank %r (it has %d)" % (self.name, rank,
                                                                         self.size))
        return c

    def revoke(self):
        """Every pending and later operation on the domain, on every member, fails with
        plexus.Revoked within one wait slice; never waits for anyone."""
        check(lib.px_domain_revoke(self._live()), "revoking domain %r" % self.name)

    def shrink(self, orch):
        """A new Domain over the survivors (dead members excluded, as the death watch
        reported them; ranks dense in the old order; windows carried). This one can then
        only be released. Raises PeerDead when a member dies during it: call it again."""
        o = orch._l3("d.shrink")
        dp = ffi.new("px_domain **")
        check(lib.px_domain_shrink(o, self._live(), dp), "shrinking domain %r" % self.name)
        nd = Domain(orch, self.name, None, None, self.buffers, None, None, _handle=dp[0])
        orch._domains.append(nd)
        return nd

    def release(self):
        if not self._released:
            self._released = True
            check(lib.px_domain_release(self._d), "releasing domain %r" % self.name)

    def __enter__(self):
        return self

    def __exit__(self, et, ev, tb):
        self.release()
        return False

    def __repr__(self):
        return "Domain(%r, chips=%s)" % (self.name, self.chips)
