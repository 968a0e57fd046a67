"""plexus.domain - communication domains as a level-3 orchestration sees them, and the
global names of chips of a job spanning hosts (level 4)."""
from typing import List, Optional, Tuple

from ._plexus_cffi import ffi, lib
from .errors import InvalidArgument, StateError, check
from .args import new_struct


def chip_global(host: int, chip: int) -> int:
    """The global name of chip `chip` of host `host` of the job (px_chip_global), for a
    domain spanning hosts: o.domain(name, chips=[plexus.chip_global(h, c), ...], ...) names
    every member so (w.job_chips() lists every host's chips, host-major). Raises
    InvalidArgument (a ValueError) when host is not 0..PX_CHIP_HOSTS_MAX - 1 or chip not
    0..PX_CHIP_HOST_CHIPS - 1; whether the job has that host and chip is checked by the
    allocation."""
    try:
        g = lib.px_chip_global(int(host), int(chip))
    except OverflowError:
        g = -1
    if g == -1:
        raise InvalidArgument("plexus.chip_global(%r, %r): host must be 0..%d and chip 0..%d; "
                              "name a host of the job (0 .. w.hosts - 1) and one of its chips "
                              "(0 .. its chips - 1)" % (host, chip, lib.PX_CHIP_HOSTS_MAX - 1,
                                                       lib.PX_CHIP_HOST_CHIPS - 1))
    return g


def _chip_split(name: int) -> Tuple[Optional[int], int]:
    """(host, chip) of a global chip name; (None, name) for a plain chip index of a worker."""
    if name >= 0 and name & lib.PX_CHIP_GLOBAL_BIT:
        return (name & ~lib.PX_CHIP_GLOBAL_BIT) >> 16, name & 0xFFFF
    return None, name


class Domain:
    """with o.domain(name, chips=, window=, buffers=, signals=) as d: a domain over chips
    (rank r is chips[r]) with a window of `window` bytes per rank carved into the named
    buffers ({name: bytes}, in order). d.transport(a, b) and d.reason(a, b) say how ranks a
    and b move bytes and why. Released at the end of the with block (or d.release()); its
    memory is freed when the run drains. A domain made with keep=True outlives its run (as a
    C domain does): later runs of the worker use it until d.release(), unless the run that
    made it failed (which frees it). Under mpirun, chips named with plexus.chip_global make
    a domain spanning hosts (d.spans_hosts); d.member(r) is rank r's (host, chip) and
    d.local_ranks the ranks on this host, the ones its o.write / o.read reach."""

    def __init__(self, orch, name, chips, window, buffers, signals, need_peer_ptr,
                 _handle=None, keep=False):
        self.keep = bool(keep)
        self._worker = orch._w
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
                             "run, or later runs when made with keep=True and not released, "
                             "nor made in a run that failed)" % self.name)
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

    @property
    def spans_hosts(self) -> bool:
        """Whether the members are named as chips of hosts (plexus.chip_global): a domain
        spanning the hosts of an MPI job."""
        return bool(self.chips) and _chip_split(self.chips[0])[0] is not None

    def member(self, rank: int) -> Tuple[int, int]:
        """(host, chip) of rank `rank`: a spanning domain's chip of that host, or this
        worker's host (w.host) and chip for a domain of one worker's chips."""
        host, chip = _chip_split(self.chip(rank))
        return (self._worker.host if host is None else host), chip

    @property
    def local_ranks(self) -> List[int]:
        """The ranks whose chips are this worker's (every rank unless the domain spans
        hosts): the ones this host's o.write / o.read reach."""
        self._live()
        if not self.spans_hosts:
            return list(range(len(self.chips)))
        me = self._worker.host
        return [r for r, c in enumerate(self.chips) if _chip_split(c)[0] == me]

    def revoke(self):
        """Every pending and later operation on the domain, on every member, fails with
        plexus.Revoked within one wait slice; never waits for anyone. A domain spanning
        hosts is revoked on every host by one host's call (the MPI proxies carry it)."""
        check(lib.px_domain_revoke(self._live()), "revoking domain %r" % self.name)

    def shrink(self, orch):
        """A new Domain over the survivors (dead members excluded, as the death watch
        reported them; ranks dense in the old order; windows carried). This one can then
        only be released. Raises PeerDead when a member dies during it: call it again. A
        domain spanning hosts is shrunk by every host's orchestration at the same point
        (like its allocation). The new domain keeps this one's keep."""
        o = orch._l3("d.shrink")
        dp = ffi.new("px_domain **")
        check(lib.px_domain_shrink(o, self._live(), dp), "shrinking domain %r" % self.name)
        nd = Domain(orch, self.name, None, None, self.buffers, None, None, _handle=dp[0],
                    keep=self.keep)
        orch._domains.append(nd)
        return nd

    def release(self):
        """The user is done with the domain (px_domain_release): later use raises
        StateError; its memory is freed once the run using it drains (at once outside a
        run)."""
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
