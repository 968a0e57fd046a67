"""plexus.Error and one subclass per status code."""
import numpy as np
import pytest

import plexus
from plexus import ffi, lib


def test_one_class_per_status():
    statuses = [v for v in ffi.typeof("px_status").elements if v != lib.PX_OK]
    classes = {}
    for st in statuses:
        lib.pxpy_set_error(st, b"probe")
        e = plexus.errors.error_from(st)
        assert isinstance(e, plexus.Error) and type(e) is not plexus.Error
        assert e.status == st and str(e) == "probe"
        classes[st] = type(e)
    assert len(set(classes.values())) == len(statuses)


def test_python_bases():
    assert issubclass(plexus.Timeout, TimeoutError)
    assert issubclass(plexus.InvalidArgument, ValueError)
    assert issubclass(plexus.NotFound, LookupError)
    assert issubclass(plexus.OutOfMemory, MemoryError)
    for c in (plexus.Timeout, plexus.InvalidArgument, plexus.PeerDead, plexus.StateError):
        assert issubclass(c, plexus.Error)


def test_peer_dead_carries_peer_and_pid():
    e = plexus.PeerDead("task 7 on chip 1 failed: chip 1 (pid 4242) was killed by signal 9")
    assert (e.peer, e.pid) == (1, 4242)
    e = plexus.PeerDead('domain "tp" rank 0: rank 3 of the domain died')
    assert (e.peer, e.pid) == (3, None)
    e = plexus.PeerDead("something else")
    assert (e.peer, e.pid, e.host) == (None, None, None)
    e = plexus.PeerDead('task 14 failed with PX_EPEERDEAD: chip 0 (pid 20606), callable '
                        '"comm.coll": ... domain "py" rank 0: rank 3 of the domain is dead: '
                        'chip 1 of host 1: chip 1 (pid 20607) died: killed by signal 9')
    assert (e.peer, e.host, e.pid) == (1, 1, 20607)  # the dead chip, not the reporter


def test_message_is_taken_right_after_the_failing_call():
    t = ffi.new("px_tensor *")
    with pytest.raises(plexus.InvalidArgument) as e:
        plexus.errors.check(lib.px_tensor_make(t, ffi.NULL, lib.PX_F32, 9,
                                               ffi.new("int64_t[9]")), "make")
    assert str(e.value).startswith("make: ") and "ndim" in str(e.value)


def test_empty_message_falls_back_to_the_status_text():
    lib.px_clear_error()
    e = plexus.errors.error_from(lib.PX_ENOTSUP)
    assert "not supported" in str(e) and "PX_ENOTSUP" in str(e)
