"""`mamba-tune train --register`: the registry round trip on a real MLflow store (embedded SQLite).

Train a tiny model twice with --register (versions 1 and 2), then load the registered model with
mlflow.pyfunc and predict on new bars: the same numbers as the checkpoint's Forecaster.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import shlex
import subprocess
import sys
import textwrap
from pathlib import Path
from types import SimpleNamespace

import mlflow
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import torch
import yaml
from mlflow import MlflowClient
from mlflow.exceptions import MlflowException

import model.train
from model.bars import read_bars
from model.baselines import past_quantities
from model.checkpoint import load_checkpoint, save_atomic
from model.config import ModelConfig
from model.features import bar_features
from model.forecaster import Forecaster
from model.train import FitResult
from tests.bars import write_bars
from tests.cli import ROOT, assert_one_line_error, free_port, run_cli
from tuning.cli.main import main
from tuning.errors import UsageError
from tuning.tracking.lineage import file_digest
from tuning.tracking.objective import metric_key
from tuning.tracking.pyfunc_model import BarsForecaster
from tuning.tracking.registry import bars_frame, check_model_name
from tuning.tracking.store import EPOCH_METRICS

TINY = {
    "data": {"window": 32, "horizon": 6},
    "model": {"d_model": 16, "n_layers": 1, "d_state": 16, "headdim": 16, "chunk_size": 16},
    "train": {"epochs": 2, "batch_size": 64, "lr": 0.003},
}
WINDOW = TINY["data"]["window"]
NAME = "mt-test"


def train(folder: Path, out: str, *extra: str) -> tuple[int, str]:
    """`mamba-tune train` in this process on the workspace's bars; (exit code, stdout)."""
    stdout = io.StringIO()
    with contextlib.redirect_stdout(stdout):
        code = main(["train", "--data", str(folder / "bars.parquet"), "--out", str(folder / out), *extra])
    return code, stdout.getvalue()


@pytest.fixture(scope="module")
def registered(tmp_path_factory):
    """Two runs registered as versions 1 and 2 of NAME in a fresh embedded store; new bars to predict on."""
    folder = tmp_path_factory.mktemp("registry")
    write_bars(folder / "bars.parquet", 1500, seed=0)
    write_bars(folder / "new.parquet", 300, seed=7)  # bars the model never saw
    (folder / "tiny.yaml").write_text(yaml.safe_dump(TINY))
    uri = f"sqlite:///{folder / 'store' / 'mlflow.db'}"
    register = ("--config", str(folder / "tiny.yaml"), "--register", NAME, "--tracking-uri", uri)
    before = {key: os.environ.get(key) for key in ("MLFLOW_TRACKING_URI", "MLFLOW_REGISTRY_URI")}
    runs = [train(folder, out, *register) for out in ("run1", "run2")]
    assert [code for code, _ in runs] == [0, 0], runs
    assert {key: os.environ.get(key) for key in before} == before  # MLflow's process-wide URIs are put back
    return SimpleNamespace(folder=folder, uri=uri, client=MlflowClient(uri, uri), stdout=[out for _, out in runs])


@pytest.fixture()
def registry_uri(registered, monkeypatch):
    """mlflow.pyfunc.load_model("models:/...") resolves against the test store, for this test only."""
    monkeypatch.setenv("MLFLOW_TRACKING_URI", registered.uri)
    monkeypatch.setenv("MLFLOW_REGISTRY_URI", registered.uri)
    yield registered.uri
    mlflow.set_tracking_uri(None)
    mlflow.set_registry_uri(None)


def versions(client: MlflowClient, name: str) -> dict[int, str]:
    """{version: run_id} of a registered model."""
    return {int(v.version): v.run_id for v in client.search_model_versions(f"name='{name}'")}


def checkpoint_forecast(checkpoint_path: Path, bars_path: Path) -> tuple[np.ndarray, np.ndarray]:
    """The reference: best.pt's Forecaster on every full window of the bars, by hand.

    -> (timestamps (n_bars - window,) int64 ns of each window's last bar, predictions (n_bars - window,)
    in target units).
    """
    saved = load_checkpoint(checkpoint_path)
    net = Forecaster(ModelConfig.from_dict(saved["model_config"]))
    net.load_state_dict(saved["model"])
    net.eval()
    scaler, data = saved["scaler"], saved["data"]
    window, residual = data["window"], data["residual_to"] == "har"
    bars = read_bars(bars_path)
    features = bar_features(bars, tuple(data["vol_lookbacks"]), residual, tuple(data["leverage_lookbacks"]))
    features = (features - np.float32(scaler["feature_mean"])) / np.float32(scaler["feature_std"])
    if residual:  # the HAR forecast, scaled, from the coefficients fitted on the training segment
        log_range = np.log(bars.high) - np.log(bars.low)
        past = past_quantities(bars.close, log_range, data["target"], tuple(data["har"]["lookbacks"]))
        features[:, -1] = past @ np.array(data["har"]["coefficients"][1:]) + data["har"]["coefficients"][0]
    ends = range(window, len(bars))  # bar 0 has no previous bar: the first window ends at bar `window`
    windows = torch.stack([torch.from_numpy(features[i - window + 1:i + 1]) for i in ends])  # (n, window, f)
    with torch.no_grad():
        scaled = net(windows)[:, 0].double()  # (n,)
    return bars.timestamp[window:], (scaled * scaler["target_std"] + scaler["target_mean"]).numpy()


def test_register_run_makes_a_new_version_per_run(registered):
    found = versions(registered.client, NAME)
    assert sorted(found) == [1, 2]
    assert found[1] != found[2]
    for version, stdout in zip((1, 2), registered.stdout, strict=True):
        assert f"registered {NAME} version {version} (run {found[version]}, experiment production)" in stdout
        assert f'mlflow.pyfunc.load_model("models:/{NAME}/{version}")' in stdout
        assert f'mlflow.set_tracking_uri("{registered.uri}")' in stdout


def test_register_run_logs_params_epoch_metrics_tags_and_files(registered):
    client, run_id = registered.client, versions(registered.client, NAME)[1]
    run = client.get_run(run_id)
    assert run.info.status == "FINISHED"
    assert client.get_experiment(run.info.experiment_id).name == "production"
    assert run.data.tags["mamba_tune.role"] == "production"
    assert run.data.tags["mamba_tune.data"] == str((registered.folder / "bars.parquet").resolve())
    params = run.data.params
    assert (params["data.window"], params["data.target"], params["model.d_model"], params["model.n_layers"],
            params["train.epochs"], params["train.lr"]) == ("32", "volatility", "16", "1", "2", "0.003")
    history = json.loads((registered.folder / "run1" / "metrics.json").read_text())
    assert run.data.tags["mamba_tune.objective"] == "mse_log"  # the default of a volatility target
    for key in EPOCH_METRICS:  # each loss under its objective's key: val_loss_mse_log
        logged = sorted((m.step, m.value) for m in client.get_metric_history(run_id, metric_key(key, "mse_log")))
        assert [step for step, _ in logged] == [0, 1, 2], key
        torch.testing.assert_close([value for _, value in logged], [float(m[key]) for m in history])
    assert {f.path for f in client.list_artifacts(run_id)} >= {"config.yaml", "metrics.json"}
    (dataset,) = [i.dataset for i in run.inputs.dataset_inputs]  # the bars it trained on
    assert (dataset.name, dataset.digest) == ("bars", file_digest(registered.folder / "bars.parquet"))
    assert run.data.tags["mamba_tune.data_digest"] == dataset.digest  # the run's tag, from the same hashing


def test_register_run_tags_the_version_with_the_first_and_last_bar_it_trained_on(registered):
    """`promote` compares new bars with these timestamps, never with a file's path or name."""
    timestamps = read_bars(registered.folder / "bars.parquet").timestamp
    tags = registered.client.get_model_version(NAME, "1").tags
    assert (tags["mamba_tune.data_first_bar_ns"], tags["mamba_tune.data_last_bar_ns"]) == (
        str(timestamps[0]), str(timestamps[-1]))


def test_registered_model_predicts_new_bars_as_the_checkpoint_does(registered, registry_uri):
    loaded = mlflow.pyfunc.load_model(f"models:/{NAME}/1")
    bars_path = registered.folder / "new.parquet"
    predicted = loaded.predict(bars_frame(read_bars(bars_path)))
    timestamps, expected = checkpoint_forecast(registered.folder / "run1" / "best.pt", bars_path)
    assert list(predicted.columns) == ["timestamp", "prediction"]
    assert len(predicted) == 300 - WINDOW
    np.testing.assert_array_equal(predicted["timestamp"].to_numpy().view(np.int64), timestamps)
    torch.testing.assert_close(torch.tensor(predicted["prediction"].to_numpy()), torch.from_numpy(expected))
    assert loaded.metadata.get_input_schema().input_names() == ["timestamp", "open", "high", "low", "close", "volume"]


def test_a_checkpoint_from_before_the_fall_inputs_forecasts_without_them(registered, tmp_path):
    """Checkpoints written before model/features.py had the fall inputs name no leverage_lookbacks."""
    config = tmp_path / "no-falls.yaml"
    config.write_text(yaml.safe_dump({**TINY, "data": {**TINY["data"], "leverage_lookbacks": []}}))
    assert train(registered.folder, "no-falls", "--config", str(config))[0] == 0
    saved = load_checkpoint(registered.folder / "no-falls" / "best.pt")
    assert saved["data"].pop("leverage_lookbacks") == []  # now as an older version wrote it
    save_atomic(saved, tmp_path / "older.pt")
    forecaster = BarsForecaster()
    forecaster.load_context(SimpleNamespace(artifacts={"checkpoint": str(tmp_path / "older.pt")}))
    bars_path = registered.folder / "new.parquet"
    predicted = forecaster.predict(None, bars_frame(read_bars(bars_path)))
    _, expected = checkpoint_forecast(registered.folder / "no-falls" / "best.pt", bars_path)
    torch.testing.assert_close(torch.tensor(predicted["prediction"].to_numpy()), torch.from_numpy(expected))


def test_a_model_of_variance_mse_forecasts_as_it_trained_with_its_har_on_the_variance_level(registered, tmp_path):
    """data.objective mse_var fits HAR on the variance level (floored, not linear in logs): the registered model
    feeds that HAR to the network as its training did, so it forecasts the bars as the training data path does."""
    from model.data import DataConfig, load_dataset
    from model.holdout import checkpoint_forecasts

    config = tmp_path / "mse-var.yaml"
    config.write_text(yaml.safe_dump({**TINY, "data": {**TINY["data"], "objective": "mse_var"}}))
    assert train(registered.folder, "mse-var", "--config", str(config))[0] == 0
    best = registered.folder / "mse-var" / "best.pt"
    assert load_checkpoint(best)["data"]["har"]["fit"] == "ols_variance"
    forecaster = BarsForecaster()
    forecaster.load_context(SimpleNamespace(artifacts={"checkpoint": str(best)}))
    bars_path = registered.folder / "bars.parquet"
    predicted = forecaster.predict(None, bars_frame(read_bars(bars_path)))["prediction"].to_numpy()
    data = load_dataset(bars_path, DataConfig(window=WINDOW, horizon=6, objective="mse_var"))
    index = data.test_index  # samples ending at these bars; the model's row for bar b is b - window
    expected = checkpoint_forecasts(best, data, index) * data.scaler.target_std + data.scaler.target_mean
    torch.testing.assert_close(torch.from_numpy(predicted[index - WINDOW]), torch.from_numpy(expected),
                               rtol=1e-4, atol=1e-4)


def test_a_model_trained_on_a_markets_clock_reads_new_bars_on_that_clock(registered, tmp_path):
    """Served bars arrive as instants without a zone (bars_frame: UTC); their time-of-day inputs are read on the
    clock of the bars the model trained on, which its checkpoint names."""
    saved = load_checkpoint(registered.folder / "run1" / "best.pt")
    saved["data"]["timezone"] = "America/New_York"  # as if trained on bars of New York's clock
    save_atomic(saved, tmp_path / "new-york.pt")
    forecaster = BarsForecaster()
    forecaster.load_context(SimpleNamespace(artifacts={"checkpoint": str(tmp_path / "new-york.pt")}))
    utc_bars = registered.folder / "new.parquet"
    predicted = forecaster.predict(None, bars_frame(read_bars(utc_bars)))
    table = pq.read_table(utc_bars)
    zoned = table.set_column(0, "timestamp", table.column("timestamp").cast(pa.timestamp("ns", tz="America/New_York")))
    pq.write_table(zoned, tmp_path / "new-york.parquet")  # the same instants, on New York's clock
    _, on_new_york = checkpoint_forecast(tmp_path / "new-york.pt", tmp_path / "new-york.parquet")
    _, on_utc = checkpoint_forecast(tmp_path / "new-york.pt", utc_bars)
    torch.testing.assert_close(torch.tensor(predicted["prediction"].to_numpy()), torch.from_numpy(on_new_york))
    assert not np.allclose(on_new_york, on_utc)  # the clock matters: read in UTC, the forecasts differ


def test_registered_model_loads_where_mamba_tune_is_not_installed(registered, tmp_path):
    """A fresh interpreter without this repository importable: the model brings its own `model` package."""
    script = textwrap.dedent(f"""
        import importlib.util, sys
        sys.meta_path = [f for f in sys.meta_path if not getattr(f, "__module__", "").startswith("__editable__")]
        sys.path = [p for p in sys.path if p not in ("", {str(ROOT)!r})]
        assert importlib.util.find_spec("tuning") is None and importlib.util.find_spec("model") is None
        import mlflow, pandas as pd
        mlflow.set_tracking_uri({registered.uri!r})
        loaded = mlflow.pyfunc.load_model("models:/{NAME}/2")
        bars = pd.read_parquet({str(registered.folder / "new.parquet")!r})  # as a user has them: tz-aware, int volume
        loaded.predict(bars).to_parquet({str(tmp_path / "out.parquet")!r})
        print(sys.modules["model"].__file__)
    """)
    done = subprocess.run([sys.executable, "-c", script], cwd=tmp_path, capture_output=True, text=True, timeout=300,
                          env={"PATH": "/usr/bin:/bin"})
    assert done.returncode == 0, done.stderr
    assert "/artifacts/code/model/__init__.py" in done.stdout  # the shipped copy, not the repository's
    predicted = pq.read_table(tmp_path / "out.parquet").to_pandas()
    _, expected = checkpoint_forecast(registered.folder / "run2" / "best.pt", registered.folder / "new.parquet")
    torch.testing.assert_close(torch.tensor(predicted["prediction"].to_numpy()), torch.from_numpy(expected))


@pytest.mark.parametrize(
    ("change", "match"),
    [
        (lambda bars: bars.head(WINDOW), f"model_input: {WINDOW} bars are too few, .* at least {WINDOW + 1}"),
        (lambda bars: bars.drop(columns="close"), "missing inputs \\['close'\\]"),
        (lambda bars: bars.iloc[::-1], "model_input: column 'timestamp' at row 1 is earlier than the previous"),
        (lambda bars: bars.assign(high=bars["low"] - 1), "model_input: column 'high' at row 0 is below low"),
    ],
    ids=["too_few_bars", "missing_column", "unsorted", "high_below_low"],
)
def test_registered_model_refuses_bad_bars_with_a_message(registered, registry_uri, change, match):
    loaded = mlflow.pyfunc.load_model(f"models:/{NAME}/1")
    bars = bars_frame(read_bars(registered.folder / "new.parquet"))
    with pytest.raises(MlflowException, match=match):
        loaded.predict(change(bars))


def test_cli_train_register_after_resume_registers_the_finished_run(registered):
    assert train(registered.folder, "resumed", "--config", str(registered.folder / "tiny.yaml"))[0] == 0
    code, stdout = train(registered.folder, "resumed", "--resume", "--register", "mt-resumed",
                         "--tracking-uri", registered.uri, "--experiment", "other")
    assert code == 0
    run_id = versions(registered.client, "mt-resumed")[1]
    run = registered.client.get_run(run_id)
    assert registered.client.get_experiment(run.info.experiment_id).name == "other"
    assert run.data.tags["mamba_tune.out"] == str((registered.folder / "resumed").resolve())


def test_cli_train_register_skips_a_diverged_run(registered, monkeypatch):
    def diverged(*args, **kwargs):
        return FitResult("nan", 1, float("inf"), 0, [])

    monkeypatch.setattr(model.train, "fit", diverged)  # `train` imports it when it starts training
    code, _ = train(registered.folder, "diverged", "--config", str(registered.folder / "tiny.yaml"),
                    "--register", "mt-diverged", "--tracking-uri", registered.uri)
    assert code == 1
    assert versions(registered.client, "mt-diverged") == {}


def test_cli_train_register_failure_keeps_the_run_and_says_how_to_register_it(registered, monkeypatch, capsys):
    from tuning.tracking import registry

    def unavailable(*args, **kwargs):
        raise MlflowException("the store went away")

    with monkeypatch.context() as patch:
        patch.setattr(registry, "register_run", unavailable)
        code, _ = train(registered.folder, "unregistered", "--config", str(registered.folder / "tiny.yaml"),
                        "--register", "mt-retry", "--tracking-uri", registered.uri)
    assert code == 1
    error = capsys.readouterr().err.strip().splitlines()[-1]
    assert error.startswith(f"error: registering the model in {registered.uri} failed (the store went away); "
                            f"the trained run is kept in {registered.folder / 'unregistered'}"), error
    retry = shlex.split(error.split("register it once the store works with: ")[1])
    assert retry[:2] == ["mamba-tune", "train"] and "--resume" in retry
    stdout = io.StringIO()
    with contextlib.redirect_stdout(stdout):
        assert main(retry[1:]) == 0
    assert sorted(versions(registered.client, "mt-retry")) == [1]


@pytest.mark.parametrize("name", ["has space", "a/b", "ünïcode", "x" * 257])
def test_check_model_name_refuses_other_characters(name):
    with pytest.raises(UsageError, match="a model name is 1 to 256 letters, digits, '-', '_' or '.'"):
        check_model_name(name)


@pytest.mark.parametrize("name", ["mamba-forecaster", "es_vol.v2", "M1"])
def test_check_model_name_accepts_letters_digits_dash_underscore_dot(name):
    assert check_model_name(name) == name


def test_cli_train_register_bad_name_is_one_line_exit_2(tmp_path):
    out = tmp_path / "out"
    done = run_cli("train", "--data", tmp_path / "nope.parquet", "--out", out, "--register", "bad name",
                   "--tracking-uri", f"sqlite:///{tmp_path / 'mlflow.db'}")
    assert_one_line_error(done, "--register 'bad name': a model name is")
    assert not out.exists() and not (tmp_path / "mlflow.db").exists()


def test_cli_train_register_unreachable_store_fails_before_training(registered, tmp_path):
    port = free_port()  # nothing listens on it
    out = tmp_path / "out"
    done = run_cli("train", "--data", registered.folder / "bars.parquet", "--config", registered.folder / "tiny.yaml",
                   "--out", out, "--register", NAME, "--tracking-uri", f"http://127.0.0.1:{port}", timeout=60)
    assert_one_line_error(done, f"tracking store http://127.0.0.1:{port}: not reachable")
    assert not out.exists()


def test_cli_train_tracking_flags_without_register_are_one_line_exit_2(tmp_path):
    done = run_cli("train", "--data", tmp_path / "bars.parquet", "--out", tmp_path / "out", "--experiment", "x")
    assert_one_line_error(done, "--tracking-uri, --experiment and --alias say where and how --register logs the run")


def test_registered_model_takes_iso_timestamps_as_model_serving_sends_them(registered, registry_uri):
    loaded = mlflow.pyfunc.load_model(f"models:/{NAME}/1")
    bars = bars_frame(read_bars(registered.folder / "new.parquet"))
    as_json = bars.assign(timestamp=bars["timestamp"].dt.strftime("%Y-%m-%dT%H:%M:%S"))
    torch.testing.assert_close(torch.tensor(loaded.predict(as_json)["prediction"].to_numpy()),
                               torch.tensor(loaded.predict(bars)["prediction"].to_numpy()))
    with pytest.raises(MlflowException, match="model_input: column 'timestamp' holds text that is not an ISO 8601"):
        loaded.predict(bars.assign(timestamp="yesterday"))
