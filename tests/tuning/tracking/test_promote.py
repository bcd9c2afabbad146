"""`mamba-tune promote MODEL --data BARS` against a real `mlflow server`: the first challenger becomes the champion,
a better one replaces it, a worse one does not; bars that overlap the models' data are refused.

The versions are tiny `train --register --alias challenger` runs: one barely trained (lr 1e-7: its forecasts are
its initialisation's), one trained (lr 3e-3, which beats persistence on these bars: tests/model/test_train.py).
"""

from __future__ import annotations

import contextlib
import io

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
import yaml
from mlflow import MlflowClient

from model.synth import synth_bars
from tests.cli import assert_one_line_error, run_cli
from tuning.cli.main import main
from tuning.tracking.lineage import file_digest

pytestmark = pytest.mark.integration
MODEL = "mt-promote"
TINY = {"data": {"window": 32, "horizon": 6},
        "model": {"d_model": 16, "n_layers": 1, "d_state": 16, "headdim": 16, "chunk_size": 16},
        "train": {"epochs": 2, "batch_size": 64}}


def later_bars(path, n_bars: int, seed: int, days: int):
    """Synthetic bars whose timestamps are moved `days` later (after those of the training file)."""
    table = synth_bars(n_bars, seed=seed)
    shifted = pc.add(table.column("timestamp"), pa.scalar(days * 86_400 * 10**9, pa.duration("ns")))
    pq.write_table(table.set_column(0, "timestamp", shifted), path)
    return path


def register_challenger(folder, uri: str, out: str, lr: float) -> None:
    """`mamba-tune train --register MODEL --alias challenger` in this process."""
    with contextlib.redirect_stdout(io.StringIO()):
        code = main(["train", "--data", str(folder / "bars.parquet"), "--config", str(folder / "tiny.yaml"),
                     "--out", str(folder / out), "--lr", str(lr), "--register", MODEL, "--alias", "challenger",
                     "--tracking-uri", uri])
    assert code == 0


def test_promote_makes_the_first_challenger_champion_then_keeps_the_better(mlflow_server, tmp_path):
    pq.write_table(synth_bars(1500, seed=0), tmp_path / "bars.parquet")
    (tmp_path / "tiny.yaml").write_text(yaml.safe_dump(TINY))
    new = later_bars(tmp_path / "new.parquet", 800, seed=5, days=60)
    client = MlflowClient(mlflow_server.url, mlflow_server.url)

    def promote(*extra):
        return run_cli("promote", MODEL, "--data", new, "--tracking-uri", mlflow_server.url, *extra, timeout=300)

    register_challenger(tmp_path, mlflow_server.url, "barely", 1e-7)  # version 1
    first = promote()
    assert first.returncode == 0, first.stderr
    assert f"{MODEL} version 1 is the champion: there was none" in first.stdout
    assert client.get_model_version_by_alias(MODEL, "champion").version == "1"

    register_challenger(tmp_path, mlflow_server.url, "trained", 3e-3)  # version 2: better
    second = promote()
    assert second.returncode == 0, second.stderr
    assert f"{MODEL} version 2 (challenger) beat version 1: now the champion" in second.stdout
    assert client.get_model_version_by_alias(MODEL, "champion").version == "2"

    register_challenger(tmp_path, mlflow_server.url, "barely-again", 1e-7)  # version 3: worse
    third = promote()
    assert third.returncode == 0, third.stderr
    assert f"{MODEL} version 2 stays the champion: version 3 did not beat it" in third.stdout
    assert client.get_model_version_by_alias(MODEL, "champion").version == "2"
    assert client.get_model_version_by_alias(MODEL, "challenger").version == "3"

    experiment = client.get_experiment_by_name("production").experiment_id
    runs = client.search_runs([experiment], "tags.`mamba_tune.role` = 'promote'", order_by=["start_time ASC"])
    assert [r.data.tags["mamba_tune.promoted"] for r in runs] == ["True", "True", "False"]
    last = runs[-1]
    metrics = last.data.metrics
    assert {"loss_challenger_mse_log", "loss_champion_mse_log", "loss_har_mse_log", "loss_persistence_mse_log",
            "n_scored"} <= set(metrics)  # the versions' objective (mamba_tune.objective): the default, mse_log
    assert metrics["loss_champion_mse_log"] < metrics["loss_challenger_mse_log"]  # trained beats barely trained
    assert (last.data.params["challenger_version"], last.data.params["champion_version"]) == ("3", "2")
    assert [(i.dataset.digest, i.tags[0].value) for i in last.inputs.dataset_inputs] == [
        (file_digest(new), "evaluation")]
    assert {a.path for a in client.list_artifacts(last.info.run_id)} == {"forecasts.png"}
    assert "  champion (version 2)" in third.stdout and "  har " in third.stdout
    assert "  challenger vs champion " in third.stdout and "  challenger vs HAR " in third.stdout  # Diebold-Mariano
    assert third.stdout.count("Diebold-Mariano stat ") == 2

    overlapping = run_cli("promote", MODEL, "--data", tmp_path / "bars.parquet", "--tracking-uri", mlflow_server.url)
    assert_one_line_error(overlapping, f"--data {tmp_path / 'bars.parquet'}: its first bar (")
    assert "is not after the last bar mt-promote@challenger (version 3) trained on" in overlapping.stderr
    nobody = run_cli("promote", "mt-nobody", "--data", new, "--tracking-uri", mlflow_server.url)
    assert_one_line_error(nobody, "model 'mt-nobody' has no version aliased challenger")
