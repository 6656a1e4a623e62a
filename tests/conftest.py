"""Shared fixtures for brainy's tests."""

import os

import pytest

from brainy._speedups import NAMES, load


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
def _twin_fixtures(name: str) -> tuple:
    """``<name>_twin`` (each twin in turn: every test taking it runs once per twin) and ``<name>_twins``
    (both at once, ``(cython, python)``, for tests that compare them)."""

    @pytest.fixture(scope="session", params=["cython", "python"], ids=["cython", "python"], name=f"{name}_twin")
    def each(request):
        return _twin(name, request.param)

    @pytest.fixture(scope="session", name=f"{name}_twins")
    def both():
        return _twin(name, "cython"), _twin(name, "python")

    return each, both


for _name in NAMES:
    globals()[f"_{_name}_twin"], globals()[f"_{_name}_twins"] = _twin_fixtures(_name)


#: The files whose tests take longest (each file's tests' times summed, from a full run's JUnit report: the 45 of
#: 15 s or more), longest first. They run first: xdist's ``loadfile`` hands files to the two workers in collection
#: order, and a long file collected last runs alone at the end while the other worker waits (a tail of four to six
#: minutes on a slow day, when a minute-long one was last).
LONGEST_FIRST = (
    "test_crash.py",
    "test_vector_snapshots.py",
    "test_wsframe.py",
    "test_kill_loop.py",
    "test_cold_start.py",
    "test_serve_protocol.py",
    "test_rss_under_load.py",
    "test_fleet_move.py",
    "test_projection_chain.py",
    "test_model.py",
    "test_vector_quantised.py",
    "test_query.py",
    "test_rowpost.py",
    "test_arbiter.py",
    "test_contract_types.py",
    "test_cli_chores.py",
    "test_log_replay.py",
    "test_vecscan.py",
    "test_ws_glue_fuzz.py",
    "test_fleet_fencing.py",
    "test_where.py",
    "test_serve_tokens.py",
    "test_vector_partitions.py",
    "test_fleet_chaos.py",
    "test_vectors.py",
    "test_embedder.py",
    "test_vecdecimal.py",
    "test_damage.py",
    "test_horizons.py",
    "test_serve_auth.py",
    "test_ws_session.py",
    "test_import.py",
    "test_fleet_shipping.py",
    "test_residency.py",
    "test_serve_malformed.py",
    "test_change_stream.py",
    "test_host_doors.py",
    "test_serve_stop.py",
    "test_sstblock.py",
    "test_serve_h3.py",
    "test_fuzz_transports.py",
    "test_mcp_sdk.py",
    "test_h1frame.py",
    "test_fleet.py",
    "test_lease.py",
)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    rank = {name: i for i, name in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.path.name, len(LONGEST_FIRST)))  # stable: the rest keep their order


@pytest.fixture
def server(tmp_path):
    """A real ``brainy serve`` subprocess on a free loopback port, serving a fresh brain ``notes``, with a
    person key reaching it and a ``!`` service key (see ``tests/server.py``); SIGTERM on the way out."""
    from server import start_server

    with start_server(tmp_path / "served") as running:
        yield running


@pytest.fixture
def etcd(tmp_path):
    """A real etcd member on loopback with its own data directory (``tests/etcd.py``), killed on the way out;
    a missing ``etcd`` binary fails under CI and skips elsewhere."""
    from etcd import start_etcd

    with start_etcd(tmp_path / "etcd") as running:
        yield running


@pytest.fixture
def cluster(tmp_path, monkeypatch):
    """etcd and moto's S3 server on loopback, and the environment a node's ``--object-store`` reads (each node
    started after inherits it); yields the etcd. moto's objects live as long as it: a fleet takes a bucket
    prefix of its own (``tmp_path.name``)."""
    from etcd import start_etcd
    from objectstore import start_moto

    with start_moto() as moto, start_etcd(tmp_path / "etcd") as etcd:
        for name, value in moto.env.items():
            monkeypatch.setenv(name, value)
        yield etcd
