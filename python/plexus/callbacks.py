"""plexus.callbacks - the C runtime calling into Python: orchestrations, Python kernels, host
tasks and chip callables (cffi's extern "Python").

Threads: every C call releases the GIL (cffi API mode); the runtime's threads that call back
into Python (the orchestration on px_run's thread, Python kernels on core threads, host
tasks) take it for the callback. Python kernels therefore run one at a time per process:
the documented slow path. C kernels run without the GIL.
"""
import traceback

from ._plexus_cffi import ffi, lib
from .comm import Comm
from .errors import Error, error_from
from .kernels import _CSLOTS, _KSLOTS
from .orchestration import Orchestration
from .tensors import DeviceTensor, _keep_now, _view

# exceptions raised inside callbacks of the current run, chained onto the run's error
_CB_EXC = []


def _cb_failed(what, e):
    # the failed callback's frames are done: drop their locals (the views of its arguments,
    # which would keep the worker's memory until the exception goes)
    traceback.clear_frames(e.__traceback__)
    if len(_CB_EXC) < 8:
        _CB_EXC.append(e)
    if isinstance(e, Error) and e.status is not None:
        st = e.status
    else:
        st = lib.PX_EKERNEL
    msg = "%s raised %s: %s" % (what, type(e).__name__, e)
    return lib.pxpy_set_error(st, msg.encode("utf-8", "replace"))


def _unpack(args, comm_last=False):
    """The Python values of a kernel's (or host task's) px_task_args."""
    out = []
    keep = None
    n = args.n
    for i in range(n):
        a = args.a[i]
        tag = a.tag
        if tag == lib.PX_TAG_SCALAR:
            k = a.scalar_kind
            if comm_last and i == n - 1:
                c = lib.px_arg_comm(args, i)
                if c == ffi.NULL:
                    raise error_from(lib.PX_EINVAL, "the kernel's communicator")
                out.append(Comm(c))
            elif k == lib.PX_SCALAR_F64:
                out.append(a.v.f64)
            elif k == lib.PX_SCALAR_I64:
                out.append(a.v.i64)
            else:
                out.append(a.v.u64)
        else:
            if keep is None:
                keep = _keep_now()
            out.append(_view(a.v.t, writeable=tag != lib.PX_TAG_IN, keep=keep))
    return out


@ffi.def_extern()
def pxpy_kernel_cb(slot, ctx, args):
    k = _KSLOTS.get(slot)
    if k is None:  # cannot happen while a worker holds the kernel; never crash on it
        return lib.pxpy_set_error(lib.PX_EKERNEL, b"python kernel slot %d has no kernel "
                                  b"(collected while registered?): keep the kernel alive"
                                  % slot)
    try:
        k.fn(*_unpack(args, k.comm))
        return 0
    except BaseException as e:  # noqa: B902 - every exception fails the task, never escapes
        return _cb_failed("python kernel %s" % k.name, e)


@ffi.def_extern()
def pxpy_host_cb(args, user):
    fn = ffi.from_handle(user)
    try:
        fn(*_unpack(args))
        return 0
    except BaseException as e:  # noqa: B902
        return _cb_failed("python host task %s" % getattr(fn, "__qualname__", fn), e)


@ffi.def_extern()
def pxpy_callable_cb(slot, o, args):
    c = _CSLOTS.get(slot)
    if c is None:
        return lib.pxpy_set_error(lib.PX_EKERNEL, b"python callable slot %d has no callable "
                                  b"(collected while registered?): keep it alive" % slot)
    orch = Orchestration(None, o, chip=True)
    try:
        vals = []
        for i in range(args.n):
            a = args.a[i]
            if a.tag == lib.PX_TAG_SCALAR:
                vals.append(_unpack_scalar(args, i))
            else:
                t = ffi.new("px_tensor *", a.v.t)
                vals.append(DeviceTensor(t, orch, 0))
        c.fn(orch, *vals)
        return 0
    except BaseException as e:  # noqa: B902
        return _cb_failed("python callable %s" % c.name, e)
    finally:
        orch._closed = True


def _unpack_scalar(args, i):
    a = args.a[i]
    if a.scalar_kind == lib.PX_SCALAR_F64:
        return a.v.f64
    if a.scalar_kind == lib.PX_SCALAR_I64:
        return a.v.i64
    return a.v.u64


@ffi.def_extern()
def pxpy_orch_cb(o, args, user):
    orch = ffi.from_handle(user)
    orch._o = o
    orch._sub.o = o
    try:
        orch._fn(orch)  # px_run copies the staged arrays back once this returns
        return 0
    except BaseException as e:  # noqa: B902
        orch._exc = e
        return _cb_failed("the Python orchestration", e)
    finally:
        orch._closed = True
