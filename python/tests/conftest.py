"""Shared fixtures of the plexus pytest tests (run by ctest as python.test_*)."""
import os

import pytest

import plexus

SLACK = float(os.environ.get("PLEXUS_TEST_SLACK", "1"))


@pytest.fixture
def w():
    with plexus.Worker(cores=2) as wk:
        yield wk


@pytest.fixture
def k(w):
    return plexus.builtin(w)
