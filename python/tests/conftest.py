"""Shared fixtures of the plexus pytest tests (run by ctest as python.test_*); the scene-test
plugin plexus.testing is loaded here."""
import pytest

import plexus

pytest_plugins = ["plexus.testing"]


@pytest.fixture
def w():
    with plexus.Worker(cores=2) as wk:
        yield wk


@pytest.fixture
def k(w):
    return plexus.builtin(w)
