"""Helpers of the tests that run level 3 beside busy threads (issue 34): a thread that
multiplies matrices with numpy, and which BLAS numpy runs on."""
import ctypes
import threading
import time

import numpy as np


def numpy_blas():
    """numpy's BLAS, as the process maps it once a matmul ran: (path, threaded OpenBLAS's
    openblas_get_num_threads or None). threadpoolctl is not a dependency: /proc/self/maps."""
    a = np.ones((64, 64))
    a @ a
    with open("/proc/self/maps") as f:
        paths = sorted({ln.split()[-1] for ln in f
                        if "/" in ln and "blas" in ln.rsplit("/", 1)[-1]})
    for p in paths:
        try:
            lib = ctypes.CDLL(p)
            get, par = lib.openblas_get_num_threads, lib.openblas_get_parallel
        except (OSError, AttributeError):
            continue
        if par() == 1:
            return p, get
    return (paths[0] if paths else "no BLAS library mapped"), None


class MatmulThread(threading.Thread):
    """Multiplies two 256 x 256 matrices in a loop (numpy's BLAS: OpenBLAS's pool, where numpy
    runs on it), checking every product, until stop()."""

    def __init__(self):
        super().__init__(daemon=True)
        self.a = np.ones((256, 256))
        self.b = np.arange(256 * 256, dtype=np.float64).reshape(256, 256) % 7
        self.want = self.a @ self.b
        self.done = 0
        self.bad = 0
        self._stop_ev = threading.Event()

    def run(self):
        while not self._stop_ev.is_set():
            if not np.array_equal(self.a @ self.b, self.want):
                self.bad += 1
            self.done += 1

    def wait_for(self, n, seconds=60):
        end = time.monotonic() + seconds
        while self.done < n and time.monotonic() < end:
            time.sleep(0.001)
        return self.done >= n

    def stop(self):
        self._stop_ev.set()
        self.join(60)
        return not self.is_alive()
