"""`mamba-tune best NAME --register MODEL`: the session's sweep's winner shipped to a real `mlflow server` as it
was trained (its trial's best.pt, no training), under the alias challenger, and loaded by alias in a fresh process.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

import pyarrow.parquet as pq
import pytest
import torch
from mlflow import MlflowClient

from tests.bars import write_bars
from tests.cli import assert_one_line_error, free_port, run_cli
from tests.tuning.tracking.test_registry import checkpoint_forecast
from tuning.bars_file import sha256_of
from tuning.search.finalists import seed_members, winner
from tuning.search.ledger import Ledger
from tuning.search.space import parse_space
from tuning.sweep.trial_files import stage_record_best, storage_filesystem
from tuning.tracking.lineage import file_digest

pytestmark = pytest.mark.integration
MODEL = "mt-winner"


def the_winner(storage: Path):
    """The sweep's confirmed winner (its ledger record), and its best.pt copied out of Ray Train's storage."""
    folder = storage / "t"
    manifest = json.loads((folder / "sweep.json").read_text())
    space = parse_space(manifest["space"], "x")
    best = winner(list(Ledger(folder / "trials.json").records.values()), space.confirm, space.run.train.seed)
    return best, best_pt(storage, best)


def best_pt(storage: Path, record):
    """The record's best.pt, copied out of Ray Train's storage."""
    copy = Path(tempfile.mkdtemp()) / "best.pt"
    assert stage_record_best(storage_filesystem(str(storage)), f"{storage}/t/train", record, copy) == copy
    return copy


def predict_in_a_fresh_process(uri: str, model_uri: str, bars: Path, tmp_path: Path):
    """The registered model loaded by URI in a new Python process and run on `bars` -> its predictions (n,)."""
    script = textwrap.dedent(f"""
        import mlflow, pandas as pd
        mlflow.set_tracking_uri({uri!r})
        loaded = mlflow.pyfunc.load_model({model_uri!r})
        loaded.predict(pd.read_parquet({str(bars)!r})).to_parquet({str(tmp_path / "out.parquet")!r})
    """)
    done = subprocess.run([sys.executable, "-c", script], cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    return torch.tensor(pq.read_table(tmp_path / "out.parquet").to_pandas()["prediction"].to_numpy())


def test_best_register_ships_the_winners_own_checkpoint_as_challenger(finished_sweep, bars, mlflow_server,
                                                                      tmp_path):
    _, storage, uri, _ = finished_sweep
    best, checkpoint = the_winner(storage)
    shipped = [run_cli("best", "t", "--storage", storage, "--out", tmp_path / f"best{i}.yaml", "--register", MODEL,
                       "--tracking-uri", mlflow_server.url) for i in (1, 2)]
    assert [done.returncode for done in shipped] == [0, 0], [done.stderr for done in shipped]
    for version, done in enumerate(shipped, start=1):
        assert (f"registered {MODEL} version {version} as @challenger: trial {best.trial_id}'s best.pt "
                f"(epoch {best.best_epoch}), no training") in done.stdout, done.stdout
        assert f'mlflow.pyfunc.load_model("models:/{MODEL}@challenger")' in done.stdout

    client = MlflowClient(mlflow_server.url, mlflow_server.url)
    assert client.get_model_version_by_alias(MODEL, "challenger").version == "2"  # the alias moved to the newest
    version = client.get_model_version(MODEL, "1")
    (test_look,) = json.loads((storage / "t" / "test.json").read_text())
    expected_tags = {"mamba_tune.confirmation": "confirmed", "mamba_tune.data_sha256": sha256_of(bars),"mamba_tune.role": "sweep-winner", "mamba_tune.sweep": "t", "mamba_tune.trial": best.trial_id,
                     "mamba_tune.data": str(bars.resolve()), "mamba_tune.data_digest": file_digest(bars),
                     "mamba_tune.best_epoch": str(best.best_epoch),
                     "mamba_tune.objective": "mse_log",  # the sweep's: the volatility target's default
                     "mamba_tune.val_loss_mse_log": f"{best.best_val_loss:.6g}",
                     "mamba_tune.test_loss_mse_log": f"{test_look['test_loss']:.6g}"}
    run = client.get_run(version.run_id)
    sweep_store = MlflowClient(uri)  # the sweep logged to the session's embedded store; the version links its run
    sweep_experiment = sweep_store.get_experiment_by_name("t").experiment_id
    (sweep_run,) = sweep_store.search_runs([sweep_experiment], "tags.`mamba_tune.role` = 'sweep'")
    assert f"(#/experiments/{sweep_experiment}/runs/{sweep_run.info.run_id}) in {uri}" in version.description
    for tags in (version.tags, run.data.tags):
        assert {k: tags.get(k) for k in expected_tags} == expected_tags
    assert run.info.status == "FINISHED" and client.get_experiment(run.info.experiment_id).name == "production"
    assert [(i.dataset.name, i.dataset.digest) for i in run.inputs.dataset_inputs] == [(bars.stem, file_digest(bars))]
    # No training: the run's val_loss curve is the trial's, epoch for epoch.
    history = json.loads(Path(client.download_artifacts(run.info.run_id, "metrics.json", str(tmp_path))).read_text())
    logged = sorted((m.step, m.value) for m in client.get_metric_history(run.info.run_id, "val_loss_mse_log"))
    assert [step for step, _ in logged] == [m["epoch"] for m in history] == list(range(best.stop_epoch + 1))
    torch.testing.assert_close([value for _, value in logged], [float(m["val_loss"]) for m in history])
    torch.testing.assert_close(dict(logged)[best.best_epoch], best.best_val_loss)

    new_bars = tmp_path / "new.parquet"
    write_bars(new_bars, 200, seed=9)
    predicted = predict_in_a_fresh_process(mlflow_server.url, f"models:/{MODEL}@challenger", new_bars, tmp_path)
    _, expected = checkpoint_forecast(checkpoint, new_bars)  # the trial's own best.pt, by hand
    torch.testing.assert_close(predicted, torch.from_numpy(expected))


@pytest.mark.faults  # the ensemble, beside the single winner here (make test within 12 minutes)
def test_best_register_ensemble_ships_the_mean_of_the_winners_seeds(finished_sweep, mlflow_server, tmp_path):
    """The session's sweep confirms its finalist on seed 1: with --ensemble, the model averages both runs."""
    _, storage, _, _ = finished_sweep
    best, _ = the_winner(storage)
    records = list(Ledger(storage / "t" / "trials.json").records.values())
    members = seed_members(records, best)
    assert [m.seed for m in members[1:]] == [1] and members[1].fold == 1
    (test_look,) = json.loads((storage / "t" / "test.json").read_text())
    ensemble = test_look["ensemble"]  # the sweep's one look scored the ensemble beside the winner
    assert ensemble["trials"] == [m.trial_id for m in members] and ensemble["n_members"] == 2
    assert ensemble["member_test_losses"][0] == pytest.approx(test_look["test_loss"], rel=1e-6)

    name = f"{MODEL}-ensemble"
    done = run_cli("best", "t", "--storage", storage, "--out", tmp_path / "best.yaml", "--register", name,
                   "--ensemble", "--tracking-uri", mlflow_server.url)
    assert done.returncode == 0, done.stderr
    assert (f"registered {name} version 1 as @challenger: the seed ensemble of trial {best.trial_id} (2 runs' "
            "best.pt, their mean forecast), no training") in done.stdout, done.stdout
    version = MlflowClient(mlflow_server.url, mlflow_server.url).get_model_version(name, "1")
    assert version.tags["mamba_tune.ensemble"] == " ".join(m.trial_id for m in members)
    assert version.tags["mamba_tune.test_loss_mse_log"] == f"{ensemble['test_loss']:.6g}"
    new_bars = tmp_path / "new.parquet"
    write_bars(new_bars, 200, seed=9)
    predicted = predict_in_a_fresh_process(mlflow_server.url, f"models:/{name}/1", new_bars, tmp_path)
    alone = [torch.from_numpy(checkpoint_forecast(best_pt(storage, m), new_bars)[1]) for m in members]
    torch.testing.assert_close(predicted, (alone[0] + alone[1]) / 2)
    assert not torch.allclose(alone[0], alone[1])  # two different models, averaged


@pytest.mark.parametrize(("flags", "message"), [
    (["--register", MODEL, "--alias", "latest"], "--alias 'latest': an alias is 1 to 255 letters"),
    (["--register", MODEL, "--alias", "v3"], "--alias 'v3': an alias is 1 to 255 letters"),
    (["--register", "bad name"], "--register 'bad name': a model name is"),
    (["--alias", "challenger"], "--alias, --tracking-uri and --experiment say how --register ships the winner"),
    (["--ensemble"], "--ensemble says what --register ships, and --register is not given; add --register MODEL"),
    (["--register", MODEL, "--tracking-uri", "http://127.0.0.1:{port}"], "tracking store http://127.0.0.1:{port}: "
                                                                         "not reachable"),
], ids=["reserved alias", "version-like alias", "bad model name", "alias without register", "ensemble without register",
        "unreachable store"])
def test_best_register_bad_input_is_one_line_exit_2_and_writes_nothing(finished_sweep, flags, message, tmp_path):
    _, storage, _, _ = finished_sweep
    port = free_port()  # nothing listens on it
    flags = [flag.format(port=port) for flag in flags]
    done = run_cli("best", "t", "--storage", storage, "--out", tmp_path / "best.yaml", *flags, timeout=120)
    assert_one_line_error(done, message.format(port=port))
    assert not (tmp_path / "best.yaml").exists()
