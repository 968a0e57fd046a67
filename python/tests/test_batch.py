"""o.submit_many: many tasks in one C call (px_submit_batch), each a real task with its
dependencies inferred from its bytes: ordering, errors naming the task, after=, scopes,
results read back, and the refusals of bad descriptions."""
import numpy as np
import pytest

import plexus
from conftest import copies

_seen = []


@plexus.kernel(name="batch_step")
def step(x, expect, tag):
    """Checks that counter x holds expect (the tasks before it on x ran), adds 1, logs."""
    _seen.append((int(tag), int(x[0]), int(expect)))
    x[0] += 1


def chain_rows(nrows):
    block = np.zeros(nrows * 8, np.int64)
    return block, [block[j * 8:j * 8 + 1] for j in range(nrows)]


def test_chains_through_a_pick_keep_their_order(w):
    del _seen[:]
    block, rows = chain_rows(3)
    n = 30
    t = np.arange(n)

    def orch(o):
        ids = o.submit_many(step, inouts=[plexus.Pick(rows, t % 3)], scalars=[t // 3, t])
        assert ids.dtype == np.uint64 and len(ids) == n
        assert np.all(np.diff(ids.astype(np.int64)) == 1)

    r = w.run(orch)
    assert block[::8].tolist() == [10, 10, 10]
    assert all(seen == expect for _, seen, expect in _seen) and len(_seen) == n
    assert r.stats["tasks"] == n + copies(w, 3)  # staged: one copy-back per written row
    assert r.stats["edges"] == (n - 3) + copies(w, 3)


def test_a_list_of_tensors_is_one_per_task_and_matches_submit(w, k):
    a = np.arange(4 * 16, dtype=np.float32).reshape(4, 16)
    outs_batch = [np.zeros(16, np.float32) for _ in range(4)]
    outs_call = [np.zeros(16, np.float32) for _ in range(4)]
    rows = [a[i] for i in range(4)]

    def orch(o):
        o.submit_many(k.add_scalar, inputs=[rows], outputs=[outs_batch],
                      scalars=[np.array([1.0, 2.0, 3.0, 4.0])])
        for i in range(4):
            o.submit(k.add_scalar, inputs=[rows[i]], outputs=[outs_call[i]], scalars=[i + 1.0])

    w.run(orch)
    for i in range(4):
        np.testing.assert_array_equal(outs_batch[i], a[i] + i + 1)
        np.testing.assert_array_equal(outs_batch[i], outs_call[i])


def test_batches_and_single_submits_interleave_in_order(w):
    del _seen[:]
    block, rows = chain_rows(1)

    def orch(o):
        o.submit(step, inouts=[rows[0]], scalars=[0, 0])
        o.submit_many(step, inouts=[rows[0]], scalars=[np.arange(1, 6), np.arange(1, 6)])
        o.submit(step, inouts=[rows[0]], scalars=[6, 6])
        o.submit_many(step, inouts=[rows[0]], scalars=[[7, 8], [7, 8]])

    w.run(orch)
    assert [tag for tag, _, _ in _seen] == list(range(9))
    assert all(seen == expect for _, seen, expect in _seen)
    assert block[0] == 9


def test_the_same_arguments_for_every_task_need_n(w, k):
    a = np.ones(8, np.float32)
    b = np.zeros(8, np.float32)

    def orch(o):
        with pytest.raises(plexus.InvalidArgument, match="pass n="):
            o.submit_many(k.scale, inputs=[a], outputs=[b], scalars=[2.0])
        ids = o.submit_many(k.scale, inputs=[a], outputs=[b], scalars=[2.0], n=3)
        assert len(ids) == 3
        assert len(o.submit_many(k.scale, inputs=[a], outputs=[b], scalars=[2.0], n=0)) == 0

    r = w.run(orch)
    np.testing.assert_array_equal(b, 2 * a)
    # three writers of b: WAW edges 0->1, 1->2, and staged the copy-back after the last
    assert r.stats["edges"] == 2 + copies(w, 1)


def test_a_failing_task_is_named_and_the_ones_before_stay(w):
    del _seen[:]
    block, rows = chain_rows(2)
    idx = np.array([0, 1, 0, 1, 0, 7, 0, 1])
    caught = []

    def orch(o):
        with pytest.raises(plexus.InvalidArgument) as e:
            o.submit_many(step, inouts=[plexus.Pick(rows, idx)],
                          scalars=[np.array([0, 0, 1, 1, 2, 2, 3, 3]), np.arange(8)])
        caught.append(e.value)
        # the orchestration goes on: the tasks before the bad one are in the graph
        o.submit(step, inouts=[rows[0]], scalars=[3, 99])

    w.run(orch)
    err = caught[0]
    assert err.index == 5
    assert len(err.submitted) == 5
    assert "task 5 of 8" in str(err) and "entry 7 of a table of 2" in str(err)
    assert "submit_many of" in str(err)
    assert sorted(tag for tag, _, _ in _seen) == [0, 1, 2, 3, 4, 99]
    assert all(seen == expect for _, seen, expect in _seen)
    assert block[::8].tolist() == [4, 2]


def test_the_signature_refuses_a_task_in_the_middle(w, k):
    good = np.ones(4, np.float32)
    wrong = np.ones(4, np.float64)
    outs = [np.zeros(4, np.float32) for _ in range(3)]
    caught = []

    def orch(o):
        with pytest.raises(plexus.InvalidArgument) as e:
            o.submit_many(k.scale, inputs=[[good, good, wrong]], outputs=[outs],
                          scalars=[3.0])
        caught.append(e.value)

    w.run(orch)
    assert caught[0].index == 2 and "task 2 of 3" in str(caught[0])
    np.testing.assert_array_equal(outs[0], 3 * good)
    np.testing.assert_array_equal(outs[1], 3 * good)


def test_after_both_ways(w, k):
    a = np.ones(4, np.float32)
    bs = [np.zeros(4, np.float32) for _ in range(5)]
    c = np.zeros(4, np.float32)

    def orch(o):
        first = o.submit(k.scale, inputs=[a], outputs=[c], scalars=[1.0])
        ids = o.submit_many(k.scale, inputs=[a], outputs=[bs], scalars=[2.0], after=[first])
        o.submit(k.noop, after=ids)        # a numpy array of ids
        o.submit(k.noop, after=[ids[-1]])  # a numpy integer
        o.submit_many(k.noop, n=2, after=ids[:2])

    r = w.run(orch)
    # 5 edges to `first`, 5 + 1 from the first noop's after=, 2 x 2 for the last batch
    # staged, also the 6 copy-backs after their writers
    assert r.stats["edges"] == 5 + 5 + 1 + 4 + copies(w, 6)
    for b in bs:
        np.testing.assert_array_equal(b, 2 * a)


def test_in_a_scope_and_reading_results(w, k):
    x = np.arange(8, dtype=np.float32)
    ys = [np.zeros(8, np.float32) for _ in range(3)]
    z = np.zeros(8, np.float32)

    def orch(o):
        with o.scope():
            tmp = o.alloc(8)
            o.submit(k.scale, inputs=[x], outputs=[tmp], scalars=[1.0])
            o.submit_many(k.add_scalar, inputs=[tmp], outputs=[ys],
                          scalars=[[10.0, 20.0, 30.0]])
        # a host array staged in the ended scope was copied back; staging it again reads it
        o.submit(k.add, inputs=[ys[0], ys[2]], outputs=[z])

    w.run(orch)
    for y, s in zip(ys, (10, 20, 30)):
        np.testing.assert_array_equal(y, x + s)
    np.testing.assert_array_equal(z, 2 * x + 40)


def test_device_tensors_in_a_pick(w, k):
    x = np.arange(4, dtype=np.float32)
    out = np.zeros((3, 4), np.float32)

    def orch(o):
        ts = [o.alloc(4) for _ in range(3)]
        o.submit_many(k.add_scalar, inputs=[x], outputs=[plexus.Pick(ts, [0, 1, 2])],
                      scalars=[[1.0, 2.0, 3.0]])
        o.submit_many(k.scale, inputs=[plexus.Pick(ts, [2, 1, 0])],
                      outputs=[[out[0], out[1], out[2]]], scalars=[1.0])

    w.run(orch)
    for i in range(3):
        np.testing.assert_array_equal(out[i], x + 3 - i)


def test_refusals_say_why(w, k):
    a = np.ones(4, np.float32)
    b = np.zeros(4, np.float32)

    def orch(o):
        with pytest.raises(plexus.InvalidArgument, match="disagree"):
            o.submit_many(k.scale, inputs=[[a, a]], outputs=[b], scalars=[[1.0, 2.0, 3.0]])
        with pytest.raises(plexus.InvalidArgument, match="disagree"):
            o.submit_many(k.scale, inputs=[[a, a]], outputs=[b], scalars=[1.0], n=3)
        with pytest.raises(plexus.InvalidArgument, match="integers"):
            o.submit_many(k.scale, inputs=[plexus.Pick([a], [0.5])], outputs=[b],
                          scalars=[1.0])
        with pytest.raises(plexus.InvalidArgument, match="dtype"):
            o.submit_many(k.scale, inputs=[a], outputs=[b], scalars=[["x", "y"]])
        with pytest.raises(plexus.InvalidArgument, match="scalar argument is True"):
            o.submit_many(k.scale, inputs=[a], outputs=[b], scalars=[True], n=1)
        with pytest.raises(plexus.InvalidArgument, match="1-D"):
            o.submit_many(k.scale, inputs=[a], outputs=[b], scalars=[np.ones((2, 2))])
        with pytest.raises(plexus.InvalidArgument, match="at most 16"):
            o.submit_many(k.noop, scalars=[1] * 17, n=1)
        with pytest.raises(plexus.InvalidArgument, match="None"):
            o.submit_many(k.scale, inputs=[[a, None]], outputs=[b], scalars=[1.0])
        with pytest.raises(plexus.InvalidArgument, match="no tensors"):
            o.submit_many(k.scale, inputs=[plexus.Pick([], [])], outputs=[b], scalars=[1.0])
        with pytest.raises(plexus.InvalidArgument, match="n="):
            o.submit_many(k.noop, n=-1)
        with pytest.raises(plexus.InvalidArgument, match="not a kernel"):
            o.submit_many(print, n=1)

    r = w.run(orch)
    assert r.stats["tasks"] == 0

    with pytest.raises(plexus.StateError, match="has returned"):
        kept = []
        w.run(lambda o: kept.append(o))
        kept[0].submit_many(k.noop, n=1)


def test_python_kernel_failure_in_a_batch_fails_the_run(w):
    @plexus.kernel(name="batch_fail_at_3")
    def fail_at_3(x, t):
        if t == 3:
            raise RuntimeError("task three fails")

    x = np.zeros(1, np.int64)

    def orch(o):
        o.submit_many(fail_at_3, inputs=[x], scalars=[np.arange(6)])

    with pytest.raises(plexus.KernelError, match="task three fails"):
        w.run(orch)
