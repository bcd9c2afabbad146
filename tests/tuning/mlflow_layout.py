"""What a sweep must look like in MLflow, read back with the MLflow client (see tuning/tracking/runs.py)."""

from __future__ import annotations

import math

import torch
from mlflow import MlflowClient

from model.checkpoint import load_checkpoint
from tuning.tracking.objective import OBJECTIVE_TAG, metric_key
from tuning.tracking.store import EPOCH_METRICS

TRIAL_ARTIFACTS = {"checkpoint/best.pt", "config.yaml", "loss_curve.png"}
SWEEP_ARTIFACTS = {"space.yaml", "data.json", "leaderboard.json", "val_loss_curves.png",
                   "val_loss_by_hyperparameter.png", "best.yaml"}
IMPORTANCES = {"param_importances.json", "param_importances.png"}  # where 2+ trials completed or were pruned


def artifact_files(client: MlflowClient, run_id: str, path: str | None = None) -> set[str]:
    files: set[str] = set()
    for item in client.list_artifacts(run_id, path):
        files |= artifact_files(client, run_id, item.path) if item.is_dir else {item.path}
    return files


def assert_sweep_logged(uri: str, name: str, records: dict[str, dict], tmp_path, lost_allowed: bool = False) -> dict:
    """One experiment `name`, one parent run, one nested run per ledger record, each epoch once; -> run ids.

    `lost_allowed`: runs tagged stop_reason `lost` (KILLED; started by a driver killed outright) may be there too.
    """
    client = MlflowClient(tracking_uri=uri)
    experiment = client.get_experiment_by_name(name)
    assert experiment is not None
    runs = client.search_runs([experiment.experiment_id], max_results=1000)
    parents = [r for r in runs if r.data.tags.get("mamba_tune.role") == "sweep"]
    assert len(parents) == 1, [r.info.run_name for r in parents]
    parent = parents[0]
    assert parent.info.status == "FINISHED"
    files = artifact_files(client, parent.info.run_id)
    assert files - IMPORTANCES == SWEEP_ARTIFACTS and files & IMPORTANCES in (set(), IMPORTANCES), files
    objective = parent.data.tags[OBJECTIVE_TAG]  # every loss's units, and the suffix of its key
    assert {"sweep.trials", "search.learning_rate", "gate.epoch", "data.n_bars", f"baseline.persistence_{objective}",
            f"baseline.har_{objective}"} <= set(parent.data.params)
    trials = {r.data.tags["trial_id"]: r for r in runs
              if r.data.tags.get("mamba_tune.role") == "trial" and r.data.tags.get("stop_reason") != "lost"}
    lost = [r for r in runs if r.data.tags.get("stop_reason") == "lost"]  # started by a driver killed outright
    assert all(r.info.status == "KILLED" for r in lost) and (lost_allowed or not lost)
    assert sorted(trials) == sorted(records) and len(runs) == len(records) + 1 + len(lost)  # no duplicates
    # Lineage: the sweep and each trial name the bars they trained on, once each, the same file.
    inputs = {r.info.run_id: [(i.dataset.name, i.dataset.digest, {t.key: t.value for t in i.tags}.get(
        "mlflow.data.context")) for i in r.inputs.dataset_inputs] for r in [parent, *trials.values()]}
    assert all(len(found) == 1 for found in inputs.values()) and len({f[0] for f in inputs.values()}) == 1, inputs
    assert inputs[parent.info.run_id][0][2] == "training"

    for trial_id, record in records.items():
        run = trials[trial_id]
        tags, params = run.data.tags, run.data.params
        assert tags["mlflow.parentRunId"] == parent.info.run_id and tags[OBJECTIVE_TAG] == objective
        assert (tags["stop_reason"], int(tags["stop_epoch"])) == (record["stop_reason"], record["stop_epoch"])
        assert run.info.status == ("FAILED" if record["stop_reason"] in ("nan", "error") else "FINISHED")
        for key, name in (("learning_rate", "train.lr"), ("weight_decay", "train.weight_decay"),
                          ("batch_size", "train.batch_size")):  # under the setting's one dotted name
            assert params[name] == str(record["params"][key]) and key not in params
        assert {"model.d_model", "train.epochs", "data.window"} <= set(params)
        assert {metric_key(k, objective) for k in EPOCH_METRICS} <= set(run.data.metrics)
        history = sorted((m.step, m.value) for m in client.get_metric_history(run.info.run_id,
                                                                               metric_key("val_loss", objective)))
        assert [step for step, _ in history] == list(range(record["stop_epoch"] + 1))  # every epoch, once
        best = min(value for _, value in history if math.isfinite(value))
        torch.testing.assert_close(best, record["best_val_loss"], rtol=1e-9, atol=0)
        files = artifact_files(client, run.info.run_id)
        assert files == TRIAL_ARTIFACTS, (trial_id, record["stop_reason"], record["stop_epoch"], sorted(files))
        checkpoint = load_checkpoint(client.download_artifacts(run.info.run_id, "checkpoint/best.pt", str(tmp_path)))
        assert checkpoint["best_epoch"] == record["best_epoch"]
        torch.testing.assert_close(checkpoint["best_val_loss"], record["best_val_loss"], rtol=1e-9, atol=0)
    return {"experiment": experiment.experiment_id, "parent": parent.info.run_id,
            **{k: r.info.run_id for k, r in trials.items()}}
