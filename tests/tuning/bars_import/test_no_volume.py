"""Bars without volume (FX, indices): they import, train and serve, with every feature but volume_change.

A CSV without a volume column imports into a Parquet without one (its provenance says so) and reads back as bars
without volume; a model records the features it was trained on, reads only those from new bars (a model trained
without volume ignores a volume column), and one trained with volume refuses bars without it, naming the column.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pcsv
import pyarrow.parquet as pq
import pytest
import torch
import yaml

from model.bars import read_bars
from model.checkpoint import load_checkpoint, save_atomic, trained_features
from model.config import ModelConfig
from model.data import DataConfig, load_dataset
from model.features import feature_names
from model.forecaster import Forecaster
from model.synth import synth_bars
from model.training import data_identity
from tuning.cli.main import main

N_BARS = 1000
DATA = {"window": 32, "horizon": 6}
TINY_MODEL = {"d_model": 16, "n_layers": 1, "d_state": 16, "headdim": 16, "chunk_size": 16}
PRICES = ("open", "high", "low", "close")


def write_fx_csv(path: Path, table: pa.Table) -> Path:
    """The bars as an FX vendor exports them: Datetime (ISO 8601, UTC), Open, High, Low, Close; no volume."""
    times = pc.strftime(table.column("timestamp"), format="%Y-%m-%dT%H:%M:%SZ")
    exported = pa.table({"Datetime": times, **{name.title(): table.column(name) for name in PRICES}})
    pcsv.write_csv(exported, path, pcsv.WriteOptions(quoting_style="none"))
    return path


@pytest.fixture(scope="module")
def bars(tmp_path_factory) -> SimpleNamespace:
    """The same synthetic bars twice: with volume (Parquet) and without (imported from an FX-style CSV)."""
    folder = tmp_path_factory.mktemp("no-volume")
    table = synth_bars(N_BARS, seed=3)
    pq.write_table(table, folder / "with.parquet")
    source = write_fx_csv(folder / "fx.csv", table)
    assert main(["data", "import", str(source), "--out", str(folder / "fx.parquet")]) == 0
    return SimpleNamespace(folder=folder, table=table, source=source, with_volume=folder / "with.parquet",
                           without=folder / "fx.parquet")


def test_a_csv_without_volume_imports_bars_without_volume_and_says_so(bars, capsys):
    schema = pq.read_schema(bars.without)
    assert schema.names == ["timestamp", *PRICES]  # no volume column, nothing standing in for one
    provenance = json.loads(schema.metadata[b"mamba_tune.provenance"])
    assert provenance["volume"] is False and "volume" not in provenance["columns"]
    read = read_bars(bars.without)
    assert read.volume is None and len(read) == N_BARS
    for name in PRICES:
        torch.testing.assert_close(torch.from_numpy(getattr(read, name).copy()),
                                   torch.from_numpy(bars.table.column(name).to_numpy().astype(np.float64)))
    np.testing.assert_array_equal(read.timestamp, bars.table.column("timestamp").to_numpy().view(np.int64))
    assert main(["data", "check", str(bars.without), "--space", "smoke"]) == 0
    assert re.search(r"^volume +none in the file \(volume_change left out of the features\)$",
                     capsys.readouterr().out, re.MULTILINE)


def test_a_volume_column_under_another_name_is_still_mapped(bars):
    table = bars.table.rename_columns(["timestamp", *PRICES, "Size"])
    source = bars.folder / "sized.csv"
    exported = table.set_column(0, "Datetime", pc.strftime(table.column("timestamp"), format="%Y-%m-%dT%H:%M:%SZ"))
    pcsv.write_csv(exported, source, pcsv.WriteOptions(quoting_style="none"))
    out = bars.folder / "sized.parquet"
    assert main(["data", "import", str(source), "--out", str(out), "--column", "volume=Size"]) == 0
    torch.testing.assert_close(torch.from_numpy(read_bars(out).volume.copy()),
                               torch.from_numpy(bars.table.column("volume").to_numpy().astype(np.float64)))


def checkpoint_of(bars_path: Path, out: Path, seed: int = 0) -> Path:
    """A checkpoint as training writes one (a tiny model's untrained weights) for the bars of `bars_path`."""
    data = load_dataset(bars_path, DataConfig(**DATA))
    torch.manual_seed(seed)
    config = ModelConfig.from_dict({**TINY_MODEL, "n_features": data.n_features, "n_targets": 1, "backend": "torch"})
    save_atomic({"model": Forecaster(config).state_dict(), "model_config": config.to_dict(),
                 "scaler": data.scaler.to_dict(), "data": data_identity(data)}, out)
    return out


def served_frame(path: Path):
    """The bars of `path` as promote and serving send them (tuning/tracking/registry.py's bars_frame)."""
    from tuning.tracking.registry import bars_frame

    return bars_frame(read_bars(path))


def served(checkpoint: Path, frame):
    """The registered model's pyfunc (tuning/tracking/pyfunc_model.py) on `checkpoint`, predicting on `frame`."""
    from tuning.tracking.pyfunc_model import BarsForecaster

    forecaster = BarsForecaster()
    forecaster.load_context(SimpleNamespace(artifacts={"checkpoint": str(checkpoint)}))
    return forecaster.predict(None, frame)


def test_a_model_trained_without_volume_ignores_the_volume_of_the_bars_it_scores(bars):
    checkpoint = checkpoint_of(bars.without, bars.folder / "fx.pt")
    frame = served_frame(bars.with_volume)
    without = served(checkpoint, frame.drop(columns="volume"))
    with_volume = served(checkpoint, frame)
    nonsense = served(checkpoint, frame.assign(volume=-1.0))  # neither read nor validated
    assert len(without) == N_BARS - DATA["window"]
    for predicted in (with_volume, nonsense):
        torch.testing.assert_close(torch.tensor(predicted["prediction"].to_numpy()),
                                   torch.tensor(without["prediction"].to_numpy()), rtol=0, atol=0)


def test_a_model_trained_with_volume_refuses_bars_without_it_naming_the_column(bars):
    from mlflow.exceptions import MlflowException

    checkpoint = checkpoint_of(bars.with_volume, bars.folder / "with.pt")
    with pytest.raises(MlflowException) as info:
        served(checkpoint, served_frame(bars.without))
    message = info.value.message
    assert message.startswith("model_input: column volume missing, this model was trained on bars with volume")
    assert "\n" not in message


def test_a_checkpoint_from_before_features_were_recorded_read_volume():
    older = {"data": {"vol_lookbacks": [1, 6], "leverage_lookbacks": [1], "residual_to": "har"}}
    assert trained_features(older) == ["log_return", "range", "body", "upper_wick", "lower_wick", "volume_change",
                                       "tod_sin", "tod_cos", "vol_1", "vol_6", "fall_1", "har"]


def test_train_on_bars_without_volume_records_the_features_it_has(bars, capsys):
    """A short real train (one epoch of a tiny model): the inputs it prints and the features best.pt records."""
    config = bars.folder / "tiny.yaml"
    config.write_text(yaml.safe_dump({"data": DATA, "model": TINY_MODEL, "train": {"epochs": 1, "batch_size": 64}}))
    out = bars.folder / "run"
    assert main(["train", "--data", str(bars.without), "--out", str(out), "--config", str(config)]) == 0
    printed = capsys.readouterr().out
    saved = load_checkpoint(out / "best.pt")
    settings = DataConfig(**DATA)
    expected = feature_names(settings.input_lookbacks, True, settings.input_leverage_lookbacks, volume=False)
    assert trained_features(saved) == saved["data"]["features"] == expected and "volume_change" not in expected
    assert saved["model_config"]["n_features"] == len(expected)
    assert f"inputs: {len(expected)} features per bar (the bars have no volume: volume_change left out)" in printed
    fx = served(out / "best.pt", served_frame(bars.with_volume))  # served on bars with volume: the volume ignored
    assert np.isfinite(fx["prediction"].to_numpy()).all()


def test_the_look_refuses_a_model_trained_with_volume_on_bars_without_it(bars):
    from model.checkpoint import CheckpointError
    from model.holdout import checkpoint_forecasts

    checkpoint = checkpoint_of(bars.with_volume, bars.folder / "with-look.pt")
    data = load_dataset(bars.without, DataConfig(**DATA))
    with pytest.raises(CheckpointError, match=r"trained on bars with volume \(volume_change is one of its inputs\), "
                                              "and these bars have no volume column"):
        checkpoint_forecasts(checkpoint, data, data.test_index)


def test_promote_of_a_model_trained_with_volume_on_bars_without_it_is_one_line_naming_the_version(
        bars, tmp_path, monkeypatch):
    import mlflow
    from mlflow.entities import Param

    from tuning.errors import UsageError
    from tuning.tracking.promotion import promote
    from tuning.tracking.store import open_store, resolve_store

    store = resolve_store(f"sqlite:///{tmp_path / 'mlflow.db'}")
    client = open_store(store)
    experiment = store.experiment_id(client, "production")
    run_id = client.create_run(experiment).info.run_id
    client.log_batch(run_id, params=[Param("data.target", "volatility"), Param("data.horizon", str(DATA["horizon"]))])
    client.create_registered_model("fx")
    client.create_model_version("fx", f"runs:/{run_id}/model", run_id=run_id,
                                tags={"mamba_tune.data_last_bar_ns": "0"})  # trained before every bar here
    client.set_registered_model_alias("fx", "challenger", "1")
    checkpoint = checkpoint_of(bars.with_volume, tmp_path / "with.pt")
    from tuning.tracking.pyfunc_model import BarsForecaster

    served_model = BarsForecaster()
    served_model.load_context(SimpleNamespace(artifacts={"checkpoint": str(checkpoint)}))
    model = SimpleNamespace(predict=lambda frame: served_model.predict(None, frame))
    monkeypatch.setattr(mlflow.pyfunc, "load_model", lambda uri: model)
    with pytest.raises(UsageError, match=re.escape(f"--data {bars.without}: fx@challenger (version 1) cannot score "
                                                   "these bars: model_input: column volume missing")):
        promote(store, "fx", read_bars(bars.without))
    assert not client.search_runs([experiment], "tags.`mamba_tune.role` = 'promote'")  # nothing recorded
