"""The registered model: an MLflow pyfunc that forecasts from a DataFrame of bars ("models from code").

tuning/tracking/registry.py logs this file as the model's code, best.pt as its "checkpoint" artifact
(a seed ensemble: its other members' as "checkpoint_1", ...; the forecast is then the mean of the
members') and the `model` package beside it (code_paths), so nothing is pickled and loading needs
neither mamba-tune nor this repository, only the packages in the model's requirements:

    import mlflow, pandas as pd
    mlflow.set_tracking_uri(...)  # the store it was registered in
    forecaster = mlflow.pyfunc.load_model("models:/mamba-forecaster/3")
    bars = pd.read_parquet("bars.parquet")  # timestamp, open, high, low, close[, volume]; window+1 rows or more
    forecaster.predict(bars)  # -> DataFrame: timestamp (UTC), prediction

The signature names the six columns, volume optional (MLflow refuses a frame without one of the others), and leaves
their types to this file, which takes a DataFrame as `read_bars` takes a file: any timestamp
type it accepts (timezone-aware or not), integer or float prices and volume.

The features are those the checkpoint records it was trained on (model/checkpoint.py's trained_features): a model
trained on bars with volume refuses bars without it, naming the column; one trained without volume ignores a volume
column (it is neither read nor validated).

This file imports only `model` (shipped with it), never `tuning`.
"""

import dataclasses

import mlflow
import numpy as np
import pandas as pd
import pyarrow as pa
import torch
from mlflow.exceptions import MlflowException

from model.bar_times import UTC
from model.bars import FIELDS, DataError, bars_from_table
from model.baselines import har_from_summary, past_quantities
from model.checkpoint import load_checkpoint, trained_features
from model.config import ModelConfig
from model.features import VOLUME_FEATURES, bar_features, feature_names
from model.forecaster import Forecaster
from model.objectives import ObjectiveScale

SOURCE = "model_input"  # what error messages call the bars they were given
BATCH = 256  # windows per forward pass: bounds memory on long inputs


class BarsForecaster(mlflow.pyfunc.PythonModel):
    """The Forecaster of a best.pt checkpoint (or the mean of a seed ensemble's) with its scaler and data settings,
    on CPU in eval mode."""

    def load_context(self, context: mlflow.pyfunc.PythonModelContext) -> None:
        names = ["checkpoint", *sorted((k for k in context.artifacts if k.startswith("checkpoint_")),
                                       key=lambda k: int(k.split("_")[1]))]
        checkpoints = [load_checkpoint(context.artifacts[name]) for name in names]  # weights_only=True
        checkpoint = checkpoints[0]
        if any(other["data"] != checkpoint["data"] for other in checkpoints[1:]):
            raise MlflowException("the ensemble's members were trained on different data or scaling; their forecasts "
                                  "cannot be averaged; register them as separate models")
        self.models = [_forecaster(c) for c in checkpoints]
        data, scaler = checkpoint["data"], checkpoint["scaler"]
        self.window, self.horizon, self.target = data["window"], data["horizon"], data["target"]
        self.vol_lookbacks = tuple(data.get("vol_lookbacks", ()))  # (checkpoints before these inputs have neither)
        self.leverage_lookbacks = tuple(data.get("leverage_lookbacks", ()))  # (nor these, which came later)
        self.har = data["har"] if data.get("residual_to") == "har" else None  # lookbacks and scaled coefficients
        self.clock = data.get("timezone", UTC)  # the training bars' clock, which time-of-day features read
        self.features = trained_features(checkpoint)  # the inputs' names, in order
        self.volume = any(name in VOLUME_FEATURES for name in self.features)  # whether it reads the bars' volume
        if feature_names(self.vol_lookbacks, self.har is not None, self.leverage_lookbacks,
                         volume=self.volume) != self.features:
            raise MlflowException(f"the checkpoint's features ({', '.join(self.features)}) are not those its data "
                                  "settings give; register a checkpoint trained by this version of mamba-tune")
        self.feature_mean = np.asarray(scaler["feature_mean"], dtype=np.float32)  # (n_features,)
        self.feature_std = np.asarray(scaler["feature_std"], dtype=np.float32)  # (n_features,)
        self.target_mean, self.target_std = float(scaler["target_mean"]), float(scaler["target_std"])

    def predict(self, context: mlflow.pyfunc.PythonModelContext, model_input: pd.DataFrame,
                params: dict | None = None) -> pd.DataFrame:
        """Bars (n_bars rows, chronological) -> (n_bars - window) rows: timestamp, prediction.

        The row for bar i forecasts from the window of bars i-window+1..i (bar 0 has no
        previous bar and is never an input); prediction is in the target's own units
        (return: a log return; volatility: a log volatility; close: a price).
        """
        bars = dataclasses.replace(_bars(model_input, self.window, self.volume), timezone=self.clock)  # same instants
        features = bar_features(bars, self.vol_lookbacks, self.har is not None,
                                self.leverage_lookbacks)  # (n_bars, n_features) unscaled, self.features' order
        features -= self.feature_mean
        features /= self.feature_std
        if self.har is not None:  # the HAR forecast the model corrects, in scaled target units as in training
            log_range = np.log(bars.high) - np.log(bars.low)  # (n_bars,)
            past = past_quantities(bars.close, log_range, self.target, tuple(self.har["lookbacks"]))
            # HAR as the objective fitted it: linear in logs, or (mse_var) on the variance level, floored
            scale = ObjectiveScale(self.target_mean, self.target_std)
            features[:, -1] = har_from_summary(self.har).forecast(past, np.arange(len(features)), scale)
        windows = torch.from_numpy(features).unfold(0, self.window, 1).transpose(1, 2)  # (n_bars-window+1, window, f)
        windows = windows[1:]  # (n_bars-window, window, n_features): the first would start at bar 0
        with torch.inference_mode():
            scaled = torch.cat([torch.stack([model(part.contiguous()) for model in self.models]).mean(dim=0)
                                for part in windows.split(BATCH)])  # (n_bars-window, 1): the members' mean
        prediction = scaled[:, 0].double().numpy() * self.target_std + self.target_mean
        return pd.DataFrame({"timestamp": pd.to_datetime(bars.timestamp[self.window:]),  # UTC, timezone-naive
                             "prediction": prediction})


def _forecaster(checkpoint: dict) -> Forecaster:
    """The checkpoint's model on CPU (the pure-torch path), in eval mode."""
    config = ModelConfig.from_saved(checkpoint["model_config"])
    model = Forecaster(dataclasses.replace(config, backend="torch"))
    model.load_state_dict(checkpoint["model"])
    return model.eval()


def _bars(frame: pd.DataFrame, window: int, volume: bool):
    """The DataFrame's bars, validated like a Parquet file's; an MlflowException (one line) if unusable.

    volume: whether the model reads volume; if not, a volume column is dropped unread (the bars have none)."""
    needed = FIELDS if volume else tuple(f for f in FIELDS if f != "volume")
    if not isinstance(frame, pd.DataFrame):
        raise MlflowException.invalid_parameter_value(
            f"{SOURCE}: got {type(frame).__name__}, bars must be a pandas DataFrame with columns {', '.join(needed)}; "
            "pass a DataFrame")
    have = {str(name).lower() for name in frame.columns}
    missing = [field for field in needed if field not in have]
    if missing == ["volume"]:
        raise MlflowException.invalid_parameter_value(
            f"{SOURCE}: column volume missing, this model was trained on bars with volume (volume_change is one of "
            "its inputs); pass the bars with their volume column, or score them with a model trained without volume")
    if missing:
        raise MlflowException.invalid_parameter_value(
            f"{SOURCE}: column(s) {', '.join(missing)} missing, bars need {', '.join(needed)}; "
            "add or rename the columns")
    if not volume:  # the model reads no volume: the bars' is neither read nor validated
        frame = frame.drop(columns=[name for name in frame.columns if str(name).lower() == "volume"])
    if len(frame) < window + 1:
        raise MlflowException.invalid_parameter_value(
            f"{SOURCE}: {len(frame)} bars are too few, the model reads windows of {window} bars after a first bar "
            f"(which has no previous bar), so at least {window + 1} are needed; pass more history")
    if "timestamp" in frame.columns and pd.api.types.is_string_dtype(frame["timestamp"]):  # JSON (serving): text
        try:
            frame = frame.assign(timestamp=pd.to_datetime(frame["timestamp"], utc=True, format="ISO8601"))
        except (ValueError, TypeError) as exc:
            raise MlflowException.invalid_parameter_value(
                f"{SOURCE}: column 'timestamp' holds text that is not an ISO 8601 time "
                f"({str(exc).splitlines()[0]}); pass datetimes or ISO 8601 strings") from None
    try:
        table = pa.Table.from_pandas(frame, preserve_index=False)
        return bars_from_table(table, SOURCE)
    except (DataError, pa.ArrowException) as exc:
        raise MlflowException.invalid_parameter_value(str(exc).splitlines()[0]) from None


mlflow.models.set_model(BarsForecaster())
