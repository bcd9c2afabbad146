"""Shared by every test package: the session's own MLflow store (never runs/mlflow of the checkout), the
session's bars and its one shared sweep, and a real `mlflow server` per test."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.bars import import_bars_from_csv
from tests.cli import run_cli

# `make test-faults` runs the tests marked `faults`: every test in these folders, and tests elsewhere marked so.
FAULT_FOLDERS = ("reliability", "cluster")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    here = Path(__file__).parent
    for item in items:
        if item.path.relative_to(here).parts[0] in FAULT_FOLDERS:
            item.add_marker(pytest.mark.faults)


# Assertions in these helpers say what differed, as in the test modules themselves.
pytest.register_assert_rewrite("tests.tuning.mlflow_layout", "tests.processes")

# A webhook a developer's shell gives every sweep (tuning/search/notify_config.py) is told of no test's sweep.
os.environ.pop("MAMBA_TUNE_WEBHOOK", None)
# Nor does a sweep storage it names (MAMBA_TUNE_STORAGE, every --storage's default) move any test's sweeps.
os.environ.pop("MAMBA_TUNE_STORAGE", None)


@pytest.fixture(scope="session", autouse=True)
def session_tracking_store(tmp_path_factory):
    uri = f"sqlite:///{tmp_path_factory.mktemp('mlflow') / 'mlflow.db'}"
    saved = os.environ.get("MLFLOW_TRACKING_URI")
    os.environ["MLFLOW_TRACKING_URI"] = uri  # inherited by the mamba-tune processes tests start
    yield uri
    if saved is None:
        os.environ.pop("MLFLOW_TRACKING_URI", None)
    else:
        os.environ["MLFLOW_TRACKING_URI"] = saved


@pytest.fixture(autouse=True)
def environment_restored():
    """Each test ends with the environment it began with: a sweep run in-process (tuning/sweep/session.py's
    start_ray) puts Ray's settings in os.environ (task events off among them), and a Ray a later test starts in
    this process would inherit them."""
    saved = dict(os.environ)
    yield
    for name in set(os.environ) - set(saved) - {"PYTEST_CURRENT_TEST"}:  # pytest's own, which it sets and removes
        del os.environ[name]
    for name, value in saved.items():
        if os.environ.get(name) != value and name != "PYTEST_CURRENT_TEST":
            os.environ[name] = value


@pytest.fixture(scope="session")
def bars(tmp_path_factory):
    """1,500 synthetic bars in a Parquet file, exported as a vendor's CSV and imported as a user imports theirs
    (`mamba-tune data import`): every test of the session's sweep reads bars that came in that way."""
    from tests.tuning.sweeps import write_space

    folder = tmp_path_factory.mktemp("data")
    return import_bars_from_csv(folder / "bars.parquet", 1500, seed=1, space=write_space(folder))


@pytest.fixture(scope="session")
def s3_server():
    """A running S3-compatible server (tests.s3_server.S3Server) with an empty bucket, for the whole session."""
    from tests.s3_server import S3Server

    server = S3Server().start()
    yield server
    server.stop()


@pytest.fixture()
def postgres():
    """A running PostgreSQL server (tests.postgres_server.PostgresServer), stopped and removed at the end."""
    from tests.postgres_server import PostgresServer
    from tests.processes import serving  # here: imported at the top, it would miss its assert rewrite (above)

    yield from serving(PostgresServer())


@pytest.fixture()
def mlflow_server(tmp_path):
    """A running `mlflow server` (tests.tuning.mlflow_server.MlflowServer), stopped at the end even on failure."""
    from tests.processes import serving
    from tests.tuning.mlflow_server import MlflowServer

    folder = tmp_path / "mlflow-server"
    folder.mkdir()
    yield from serving(MlflowServer(folder))


@pytest.fixture(scope="module")
def tracking_server(tmp_path_factory):
    """A running `mlflow server` for a whole module (a Ray cluster's tests, which share one cluster)."""
    from tests.processes import serving
    from tests.tuning.mlflow_server import MlflowServer

    yield from serving(MlflowServer(tmp_path_factory.mktemp("mlflow-server")))


@pytest.fixture(scope="session")
def finished_sweep(bars, tmp_path_factory):
    """The 5-trial sweep of tests.tuning.sweeps.SPACE, one trial at a time, its finalist confirmed on a second seed
    and a second fold (3 runs: the confirm section given by --set), run once per session into an embedded MLflow store (the tuning tests read its facts;
    test_session checks its initial points end as STRAIGHT_THROUGH, which the interruption test asks of a resumed sweep).

    -> (folder, storage, tracking_uri, completed process)
    """
    from tests.tuning.sweeps import write_space

    folder = tmp_path_factory.mktemp("sweep")
    storage, uri = folder / "sweeps", f"sqlite:///{folder / 'mlflow' / 'mlflow.db'}"
    # One trial at a time: ASHA's decisions depend on the order trials reach a rung, and this order is then fixed.
    # gpus_per_trial auto, as search_spaces/default.yaml asks: no GPU here, so the trials run on CPUs.
    space = write_space(folder, resources={"max_concurrent": 1, "gpus_per_trial": "auto"})
    confirm = ["--set", "confirm.top_k=1", "--set", "confirm.seeds=[1]", "--set", "confirm.folds=2"]  # not in the file
    done = run_cli("sweep", "--data", bars, "--space", space, "--storage", storage, "--tracking-uri", uri, *confirm)
    assert done.returncode == 0, done.stderr[-3000:]
    return folder, storage, uri, done
