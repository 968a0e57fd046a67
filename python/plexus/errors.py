"""plexus.errors - one exception class per px_status code.

Every failing C call raises the class of its status with the message px_last_error() holds
right after the call (on the same thread): what failed, the values involved, why, and what
to do. plexus.Error is the base of them all.
"""
import re

from ._plexus_cffi import ffi, lib


class Error(Exception):
    """A plexus call failed. .status is the px_status code, .status_name its name."""

    status = None

    def __init__(self, message, status=None):
        super().__init__(message)
        if status is not None:
            self.status = status
        self.message = message

    @property
    def status_name(self):
        if self.status is None:
            return None
        return ffi.string(lib.px_status_name(self.status)).decode()


class InvalidArgument(Error, ValueError):
    status = lib.PX_EINVAL


class OutOfMemory(Error, MemoryError):
    status = lib.PX_ENOMEM


class NotSupported(Error):
    status = lib.PX_ENOTSUP


class Timeout(Error, TimeoutError):
    status = lib.PX_ETIMEDOUT


class PeerDead(Error):
    """A chip process (or a domain's rank) died. .peer is the chip index (or the domain rank)
    and .pid its process id, as far as the message names them (else None); .host is the
    dead chip's host when it is a chip of another host of the job (level 4: "chip 1 of host
    1: chip 1 (pid 4242) died"), else None."""

    status = lib.PX_EPEERDEAD

    def __init__(self, message, status=None):
        super().__init__(message, status)
        self.host = None
        m = re.search(r"\bchip (\d+) of host (\d+): chip \d+ \(pid (\d+)", message)
        if m:
            self.peer, self.host, self.pid = int(m.group(1)), int(m.group(2)), int(m.group(3))
            return
        m = re.search(r"\b(?:chip|sub) (\d+) \(pid (\d+)", message)
        if m:
            self.peer, self.pid = int(m.group(1)), int(m.group(2))
        else:
            m = re.search(r"rank (\d+) of the domain", message)
            self.peer = int(m.group(1)) if m else None
            m = re.search(r"\bpid (\d+)", message)
            self.pid = int(m.group(1)) if m else None


class IOFailure(Error, OSError):
    status = lib.PX_EIO


class StateError(Error):
    status = lib.PX_ESTATE


class Aborted(Error):
    status = lib.PX_EABORTED


class KernelError(Error):
    status = lib.PX_EKERNEL


class NotFound(Error, LookupError):
    status = lib.PX_ENOENT


class Revoked(Error):
    """PX_EREVOKED: the domain was revoked (or shrunk); shrink it or release it."""
    status = lib.PX_EREVOKED


_BY_STATUS = {c.status: c for c in (InvalidArgument, OutOfMemory, NotSupported, Timeout,
                                    PeerDead, IOFailure, StateError, Aborted, KernelError,
                                    NotFound, Revoked)}


def _status_values():
    return [v for v, _ in ffi.typeof("px_status").elements.items() if v != lib.PX_OK]


# A status code the headers gained after this file was written still gets a class of its own
# (named after the code), so no C error is ever raised as a bare Error.
for _v in _status_values():
    if _v not in _BY_STATUS:
        _n = ffi.string(lib.px_status_name(_v)).decode()
        _BY_STATUS[_v] = type(_n, (Error,), {"status": _v})


def error_from(status, context=None):
    """The exception for status, with px_last_error()'s message (taken now)."""
    msg = ffi.string(lib.px_last_error()).decode("utf-8", "replace")
    if not msg:
        msg = "%s (%s)" % (ffi.string(lib.px_status_str(status)).decode(),
                           ffi.string(lib.px_status_name(status)).decode())
    if context and not msg.startswith(context):  # a message that names the call already
        msg = "%s: %s" % (context, msg)
    return _BY_STATUS.get(status, Error)(msg, status)


def check(status, context=None):
    if status != 0:
        raise error_from(status, context)
