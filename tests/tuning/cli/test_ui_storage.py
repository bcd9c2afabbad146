"""`ui NAME --storage DIR`: two sweeps of one name in two storages each open their own runs, in the MLflow store
their sweep.json names. The storages and the MLflow runs are made by hand (no sweep); the server is not started."""

from __future__ import annotations

import json
import re
from urllib.parse import unquote

import pytest
from mlflow import MlflowClient

from tests.cli import free_port
from tuning.cli import ui
from tuning.cli.main import main
from tuning.sweep.manifest import SweepManifest

NAME = "ui_storage"  # an experiment of its own in the session's store


class Server:
    """Stands in for the `mlflow server` process: it starts, answers and ends at once."""

    def __init__(self, command, **_):
        self.command, self.returncode = command, 0

    def poll(self):
        return 0

    def wait(self, timeout=None):
        return 0


def sweep_of(storage, uri: str | None) -> str:
    """A sweep NAME in `storage` whose runs (its parent and a trial) are in the store `uri` (None: the default);
    -> its sweep_id."""
    manifest = SweepManifest.new(NAME, storage / "bars.parquet", {}, 1, str(storage), uri, {"residual_to": "har",
                                 "leverage_lookbacks": []}, None)
    (storage / NAME).mkdir(parents=True)
    (storage / NAME / "sweep.json").write_text(json.dumps(manifest.to_dict()))
    client = MlflowClient(uri) if uri else MlflowClient()
    found = client.get_experiment_by_name(NAME)
    experiment = found.experiment_id if found else client.create_experiment(NAME)
    for key in ("sweep", "trial_0"):
        client.create_run(experiment, tags={"mamba_tune.key": key, "mamba_tune.sweep_id": manifest.sweep_id})
    return manifest.sweep_id


@pytest.fixture()
def opened(monkeypatch, capsys):
    """ui's links as `mamba-tune ui ARGS` prints them, its server stood in for: ARGS -> the sweep's page."""
    monkeypatch.setattr(ui.subprocess, "Popen", Server)
    monkeypatch.setattr(ui, "_wait_healthy", lambda url, server: True)
    monkeypatch.setattr(ui.signal, "signal", lambda *args: None)  # pytest's own handlers stay
    for display in ("DISPLAY", "WAYLAND_DISPLAY"):
        monkeypatch.delenv(display, raising=False)

    def page(*args: str) -> str:
        assert main(["ui", *args, "--port", str(free_port())]) == 0, capsys.readouterr().err
        return re.search(rf"sweep {NAME}: http://127.0.0.1:\d+(/#/.*)", capsys.readouterr().out).group(1)

    return page


def test_two_sweeps_of_one_name_in_two_storages_open_their_own_runs(tmp_path, opened, session_tracking_store,
                                                                    monkeypatch, capsys):
    mine = sweep_of(tmp_path / "runs" / "sweeps", None)  # logged to the default store: MLFLOW_TRACKING_URI's here
    demo = sweep_of(tmp_path / "runs" / "demo" / "sweeps", session_tracking_store)  # its manifest names the store
    experiment = MlflowClient(session_tracking_store).get_experiment_by_name(NAME).experiment_id
    pages = {storage: unquote(opened(NAME, "--storage", str(tmp_path / storage)))
             for storage in ("runs/sweeps", "runs/demo/sweeps")}
    runs = f"/#/experiments/{experiment}/runs"
    assert pages["runs/sweeps"] == f"{runs}?searchFilter=tags.`mamba_tune.sweep_id` = '{mine}'"
    assert pages["runs/demo/sweeps"] == f"{runs}?searchFilter=tags.`mamba_tune.sweep_id` = '{demo}'"
    assert opened(NAME) == runs  # no --storage: the experiment of that name, both sweeps' runs
    absent = tmp_path / "absent" / "mlflow.db"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{absent}")  # the default store moves; the manifest's stays
    assert unquote(opened(NAME, "--storage", str(tmp_path / "runs/demo/sweeps"))) == pages["runs/demo/sweeps"]
    assert main(["ui", NAME, "--storage", str(tmp_path / "runs/sweeps")]) == 2
    assert capsys.readouterr().err.startswith(f"error: no MLflow store at {absent}")


def test_storage_without_the_sweep_or_without_a_name_is_refused_in_one_line(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)  # no default or demo storage here (a checkout after `make demo` has one)
    assert main(["ui", "nope", "--storage", str(tmp_path)]) == 2
    assert capsys.readouterr().err.startswith(f"error: no sweep named 'nope' in {tmp_path}, nor any sweep there")
    assert main(["ui", "--storage", str(tmp_path)]) == 2
    assert capsys.readouterr().err == (f"error: --storage {tmp_path} says where sweep NAME lives, and no NAME is "
                                       "given; add the sweep's name (`mamba-tune list --storage DIR` shows them) or "
                                       "drop --storage\n")
