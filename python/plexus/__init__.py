"""plexus - Python front end of the plexus task-graph runtime.

    import numpy as np, plexus
    with plexus.Worker(cores=4) as w:
        k = plexus.builtin(w)
        a = np.arange(1 << 20, dtype=np.float32); b = np.empty_like(a)
        w.run(lambda o: o.submit(k.scale, inputs=[a], outputs=[b], scalars=[2.0]))

docs/user-guide.md ("Python") walks through it; docs/architecture.md says how it is built.
"""
from ._plexus_cffi import ffi, lib
from .errors import (Error, InvalidArgument, OutOfMemory, NotSupported, Timeout, PeerDead,
                     IOFailure, StateError, Aborted, KernelError, NotFound, Revoked)
from .args import In, Out, InOut, OutputExisting, NoDep, U64, Pick, px_dtype, np_dtype
from .tensors import DeviceTensor
from .kernels import CKernel, KernelLibrary, PyKernel, Callable, kernel, callable
from .comm import Comm
from .orchestration import Orchestration
from .worker import Worker, RunResult, builtin, caps, doctor, chip_index, config
from .domain import Domain, chip_global

__version__ = "%d.%d.%d" % (lib.PX_VERSION_MAJOR, lib.PX_VERSION_MINOR, lib.PX_VERSION_PATCH)

__all__ = ["Error", "InvalidArgument", "OutOfMemory", "NotSupported", "Timeout", "PeerDead",
           "IOFailure", "StateError", "Aborted", "KernelError", "NotFound", "Revoked", "Worker",
           "Orchestration", "RunResult", "DeviceTensor", "CKernel", "KernelLibrary",
           "PyKernel", "Callable", "Comm", "Domain", "In", "Out", "InOut", "OutputExisting",
           "NoDep", "U64", "Pick", "kernel", "callable", "builtin", "caps", "doctor", "chip_index",
           "config", "chip_global", "px_dtype", "np_dtype", "ffi", "lib"]
