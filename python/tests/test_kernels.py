"""Kernels three ways: C kernels by name from a shared library, the built-ins, Python."""
import os

import numpy as np
import pytest

import plexus


def test_load_kernels_by_name(w):
    path = os.path.join(os.path.dirname(plexus.__file__), "libplexus_pykernels.so")
    lib = w.load_kernels(path, names=["scale"])
    assert lib.scale.name == "plexus_pykernels.scale"
    assert lib["add"] is lib.add
    a = np.arange(8, dtype=np.float32)
    b = np.zeros(8, np.float32)
    c = np.zeros(8, np.float32)
    w.run(lambda o: (o.submit(lib.scale, inputs=[a], outputs=[b], scalars=[4.0]),
                     o.submit(lib.add, inputs=[a, b], outputs=[c])))
    np.testing.assert_array_equal(c, 5 * a)


def test_missing_library_and_symbol(w):
    with pytest.raises(plexus.NotFound, match="cannot open"):
        w.load_kernels("/nonexistent/libnothing.so")
    lib = plexus.builtin(w)
    with pytest.raises(plexus.NotFound, match="no symbol 'nope'"):
        lib.nope


def test_matmul_builtin(w, k):
    rng = np.random.default_rng(1)
    A = rng.integers(-3, 4, (16, 8)).astype(np.float32)
    B = rng.integers(-3, 4, (8, 12)).astype(np.float32)
    C = np.zeros((16, 12), np.float32)
    w.run(lambda o: o.submit(k.matmul, inputs=[A, B], outputs=[C]))
    np.testing.assert_array_equal(C, A @ B)  # small integers: exact


def test_c_kernel_failure_names_task_and_kernel(w, k):
    with pytest.raises(plexus.KernelError) as e:
        w.run(lambda o: o.submit(k.fail))
    assert "plexus_pykernels.fail" in str(e.value) and "on purpose" in str(e.value)
    assert e.value.status == plexus.lib.PX_EKERNEL and e.value.status_name == "PX_EKERNEL"


def test_python_kernel_exception_is_the_cause(w):
    @plexus.kernel
    def boom(x):
        raise ZeroDivisionError("inside the kernel")

    x = np.zeros(2)
    with pytest.raises(plexus.KernelError) as e:
        w.run(lambda o: o.submit(boom, inputs=[x]))
    assert "ZeroDivisionError: inside the kernel" in str(e.value)
    assert isinstance(e.value.__cause__, ZeroDivisionError)


def test_python_kernel_may_raise_a_plexus_error_with_its_status(w):
    @plexus.kernel(name="picky")
    def picky(x):
        raise plexus.InvalidArgument("x must be positive")

    with pytest.raises(plexus.InvalidArgument, match="x must be positive"):
        w.run(lambda o: o.submit(picky, inputs=[np.zeros(1)]))


def test_python_kernels_and_c_kernels_in_one_graph(w, k):
    order = []

    @plexus.kernel
    def record(x, y):
        order.append(float(x[0]))
        y[:] = x + 1

    a = np.zeros(4, np.float32)
    b = np.zeros(4, np.float32)

    def orch(o):
        o.submit(record, inputs=[a], outputs=[b])           # b = 1
        o.submit(k.scale, inputs=[b], outputs=[a], scalars=[10.0])  # a = 10 (WAR on a)
        o.submit(record, inputs=[a], outputs=[b])           # b = 11

    w.run(orch)
    assert order == [0.0, 10.0]
    assert b.tolist() == [11] * 4 and a.tolist() == [10] * 4


def test_python_kernels_run_on_core_threads(w):
    import threading
    seen = set()

    @plexus.kernel
    def where(x):
        seen.add(threading.get_ident())

    main = threading.get_ident()
    xs = [np.zeros(1) for _ in range(8)]
    w.run(lambda o: [o.submit(where, inputs=[x]) for x in xs])
    assert seen and main not in seen


def test_builtin_kernels_refuse_missing_arguments(w, k):
    # every built-in kernel that reads its arguments has a signature: a wrong call is an
    # error of submit, never a kernel dereferencing a missing tensor
    for name in ("scale", "add", "mul", "add_scalar", "matmul", "busy"):
        with pytest.raises(plexus.InvalidArgument):
            w.run(lambda o: o.submit(getattr(k, name)))


def test_kernel_slots_are_reused_after_collection():
    import gc
    # more Python kernels over a session than the process has trampolines: each test
    # worker's kernels are collected with it, and their slots serve the next ones
    for i in range(3 * plexus.doctor()["python"]["kernel_slots"] // 8):
        with plexus.Worker(cores=1) as w:
            ks = []
            for j in range(8):
                @plexus.kernel
                def add_j(x, y, j=j):
                    y[:] = x + j
                ks.append(add_j)
            x = np.zeros(2)
            ys = [np.zeros(2) for _ in ks]
            w.run(lambda o: [o.submit(kk, inputs=[x], outputs=[y]) for kk, y in zip(ks, ys)])
            assert [y[0] for y in ys] == list(range(8))
        del w, ks, add_j
        gc.collect()
