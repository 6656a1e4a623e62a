"""Shared fixtures for brainy's tests."""

import os

import pytest

from brainy._speedups import load


def _twin(name: str, which: str):
    """One twin of a speedup. A missing compiled twin skips that parameter on a developer's
    machine; under CI (``CI=true``) it fails, because CI must test the compiled twin."""
    try:
        return load(name, which)
    except ImportError as exc:
        if os.environ.get("CI") == "true":
            pytest.fail(f"CI must test the compiled twin of {name}: {exc}")
        pytest.skip(f"compiled {name} is not built: {exc}")


# Session scope: a twin is a module with no per-test state, and hypothesis refuses
# function-scoped fixtures in @given tests.
@pytest.fixture(scope="session", params=["cython", "python"], ids=["cython", "python"])
def sstblock_twin(request):
    """Each twin of ``sstblock`` in turn: every test taking it runs once per twin."""
    return _twin("sstblock", request.param)


@pytest.fixture(scope="session")
def sstblock_twins():
    """Both twins of ``sstblock`` at once, ``(cython, python)``, for tests that compare them."""
    return _twin("sstblock", "cython"), _twin("sstblock", "python")


@pytest.fixture(scope="session", params=["cython", "python"], ids=["cython", "python"])
def h1frame_twin(request):
    """Each twin of ``h1frame`` in turn: every test taking it runs once per twin."""
    return _twin("h1frame", request.param)


@pytest.fixture(scope="session", params=["cython", "python"], ids=["cython", "python"])
def postings_twin(request):
    """Each twin of ``postings`` in turn: every test taking it runs once per twin."""
    return _twin("postings", request.param)


@pytest.fixture(scope="session")
def postings_twins():
    """Both twins of ``postings`` at once, ``(cython, python)``, for tests that compare them."""
    return _twin("postings", "cython"), _twin("postings", "python")


@pytest.fixture
def server(tmp_path):
    """A real ``brainy serve`` subprocess on a free loopback port, serving a fresh brain ``notes``, with a
    person key reaching it and a ``!`` service key (see ``tests/server.py``); SIGTERM on the way out."""
    from server import start_server

    with start_server(tmp_path / "served") as running:
        yield running


@pytest.fixture(scope="session", params=["cython", "python"], ids=["cython", "python"])
def cdc_twin(request):
    """Each twin of ``cdc`` in turn: every test taking it runs once per twin."""
    return _twin("cdc", request.param)


@pytest.fixture(scope="session", params=["cython", "python"], ids=["cython", "python"])
def vecpack_twin(request):
    """Each twin of ``vecpack`` in turn."""
    return _twin("vecpack", request.param)


@pytest.fixture(scope="session", params=["cython", "python"], ids=["cython", "python"])
def wsframe_twin(request):
    """Each twin of ``wsframe`` in turn: every test taking it runs once per twin."""
    return _twin("wsframe", request.param)
