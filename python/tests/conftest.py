"""Shared fixtures of the plexus pytest tests (run by ctest as python.test_*); the scene-test
plugin plexus.testing is loaded here."""
import pytest

import plexus

pytest_plugins = ["plexus.testing"]


@pytest.fixture(params=["auto", "copy"])
def w(request):
    """A level-2 worker of 2 cores, once with host arrays in place (the default where the
    profile allows it) and once staged (host_arrays="copy")."""
    with plexus.Worker(cores=2, host_arrays=request.param) as wk:
        yield wk


def copies(w, n):
    """n copy-back tasks when w stages host arrays, none when it uses them in place."""
    return n if w.host_arrays == "copy" else 0


@pytest.fixture
def k(w):
    return plexus.builtin(w)
