"""`mamba-tune train` end to end: files in --out, resume, and one-line errors."""

from __future__ import annotations

import json

import pytest
import torch
import yaml

from tests.cli import assert_one_line_error, cli_env, run_cli
from tests.tuning.cluster.fake_gpu import blind_gpu_env, blind_gpu_verdict
from tuning.search.recipe import TrainingRecipe

SMALL = {
    "data": {"window": 32, "horizon": 6},
    "model": {"d_model": 32, "n_layers": 2, "d_state": 16, "headdim": 16, "chunk_size": 16},
    "train": {"epochs": 2, "batch_size": 64, "lr": 0.003},
}


@pytest.fixture(scope="module")
def workspace(tmp_path_factory):
    """A folder with bars.parquet and small.yaml, made through the CLI."""


    folder = tmp_path_factory.mktemp("train")
    assert run_cli("data", "synth", "--out", folder / "bars.parquet", "--bars", "1500").returncode == 0
    (folder / "small.yaml").write_text(yaml.safe_dump(SMALL))
    return folder


def test_cli_train_writes_config_metrics_and_checkpoints(workspace):
    out = workspace / "run"
    done = run_cli("train", "--data", workspace / "bars.parquet", "--config", workspace / "small.yaml", "--out", out)
    assert done.returncode == 0, done.stderr
    assert sorted(p.name for p in out.iterdir()) == ["best.pt", "config.yaml", "last.pt", "metrics.json", "test.json"]
    metrics = json.loads((out / "metrics.json").read_text())
    assert [m["epoch"] for m in metrics] == [0, 1, 2]
    saved = TrainingRecipe.from_yaml(out / "config.yaml")
    assert saved == TrainingRecipe.from_dict(SMALL)
    assert (out / "config.yaml").read_text().startswith("# mamba-tune run configuration. Run it with:\n#   mamba-tune train")
    for label in ("status         completed at epoch 2", "best val loss", "vs baselines   HAR", "overfit ratio"):
        assert label in done.stdout
    assert "epoch   0/2" in done.stdout and "before training (E0)" in done.stdout
    # The losses' objective named: the volatility target's default, MSE of log volatility (docs/winner.md).
    assert "baselines (validation MSE of log volatility, scaled units): HAR " in done.stdout
    assert "better; MSE of log volatility)" in done.stdout
    assert json.loads((out / "test.json").read_text())["objective"] == "mse_log"


@pytest.mark.faults  # a run interrupted and resumed (make test within 12 minutes)
def test_cli_train_never_overwrites_a_run_and_resumes_it(workspace):
    out = workspace / "kept"
    args = ("train", "--data", workspace / "bars.parquet", "--config", workspace / "small.yaml", "--out", out)
    assert run_cli(*args).returncode == 0
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    assert_one_line_error(run_cli(*args), f"{out} already holds a training run, which is never overwritten")
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before
    assert_one_line_error(run_cli(*args, "--resume"), "--resume continues the run exactly as configured")
    done = run_cli("train", "--data", workspace / "bars.parquet", "--out", out, "--resume")
    assert done.returncode == 0, done.stderr  # already complete: nothing more to train
    assert json.loads((out / "metrics.json").read_text()) == json.loads(before["metrics.json"])


def test_cli_train_overrides_apply_and_are_validated(workspace):
    out = workspace / "override"
    done = run_cli("train", "--data", workspace / "bars.parquet", "--config", workspace / "small.yaml",
                   "--epochs", "1", "--lr", "0.001", "--batch-size", "128", "--out", out)
    assert done.returncode == 0, done.stderr
    saved = TrainingRecipe.from_yaml(out / "config.yaml").train
    assert (saved.epochs, saved.lr, saved.batch_size) == (1, 0.001, 128)
    by_set = workspace / "by-set"
    done = run_cli("train", "--data", workspace / "bars.parquet", "--config", workspace / "small.yaml",
                   "--set", "train.epochs=1", "--set", "train.lr=2e-3", "--set", "train.batch_size=128", "--out", by_set)
    assert done.returncode == 0, done.stderr
    saved = TrainingRecipe.from_yaml(by_set / "config.yaml")
    assert (saved.train.epochs, saved.train.lr, saved.train.batch_size) == (1, 0.002, 128)  # 2e-3: a number
    assert saved.model == TrainingRecipe.from_yaml(out / "config.yaml").model  # the rest is the --config's


@pytest.mark.parametrize(
    ("extra", "config_text", "match"),
    [
        (["--lr", "-1"], None, "train: lr must be in (0, 1), got -1.0"),
        (["--set", "train.lr=-1"], None, "{config} (with --set train.lr=...): train: lr must be in (0, 1), got -1"),
        (["--set", "model.d_modle=32"], None, "{config} (with --set model.d_modle=...): unknown key model.d_modle; "
         "did you mean model.d_model?"),
        (["--set", "learning_rate=1e-3", "--set", "train.lr=2e-3"], None, "--set learning_rate and --set train.lr both "
         "set train.lr; give one of them"),
        (["--lr", "1e-3", "--set", "learning_rate=2e-3"], None, "--lr and --set learning_rate both set train.lr"),
        (["--set", "train"], None, "--set number 1 has no '=', so it is not KEY=VALUE"),
        (["--batch-size", "0"], None, "train: batch_size must be a positive integer, got 0"),
        ([], "data: {window: 32\n", "{config}: invalid YAML at line 2"),
        ([], "model: {d_modle: 32}\n", "{config}: unknown key model.d_modle; did you mean model.d_model?"),
        ([], "optimizer: {}\n", "{config}: unknown key 'optimizer' at the top level, whose sections are data, model, "
         "train"),
        ([], "model: {headdim: 48}\n", "{config}: model: headdim must divide expand*d_model"),
        ([], "data: {window: 5000}\n", "{data}: 1,500 bars are too few"),
        (["--resume"], None, "{out} holds no checkpoint (last.pt) to resume"),
        ([], "model: {backend: mamba_ssm}\ndata: {window: 32}\n", "model.backend mamba_ssm cannot run here: mamba-ssm's fused kernels do not load"),
        ([], "train: {eps: .nan}\n", "{config}: train: eps must be a positive number, got nan"),
        ([], "model: {rmsnorm: 'no'}\n", "{config}: model: rmsnorm must be true or false, got 'no'"),
        ([], "data: {columns: {timestamp: 5}}\n", "{config}: data: columns must map bar fields"),
        ([], "data: {window: 16, vol_lookbacks: [1, 5, 22]}\n",
         "{config}: data: vol_lookbacks: a lookback of 22 bars is longer than the window of 16 bars"),
        ([], "data: {window: 16, vol_lookbacks: [1, 4], leverage_lookbacks: [1, 5, 22]}\n",
         "{config}: data: leverage_lookbacks: a lookback of 22 bars is longer than the window of 16 bars"),
        ([], "data: {residual_to: persistence}\n", "{config}: data: residual_to must be one of har, none"),
        ([], "data: {window: 64, align_window: 32}\n",
         "{config}: data: align_window 32 is shorter than the window of 64 bars, and samples aligned to it would not "
         "leave the window room; use an align_window of at least 64, or remove it"),
    ],
)
def test_cli_train_bad_input_is_one_line_exit_2(workspace, tmp_path, extra, config_text, match):
    config = tmp_path / "c.yaml"
    config.write_text(config_text or yaml.safe_dump(SMALL))
    out = tmp_path / "out"
    args = ["train", "--data", workspace / "bars.parquet", "--out", out, *extra]
    if "--resume" not in extra:
        args += ["--config", config]
    done = run_cli(*args)
    assert_one_line_error(done, match.format(config=config, data=workspace / "bars.parquet", out=out))


def test_cli_train_missing_data_file_is_one_line_exit_2(tmp_path):
    assert_one_line_error(run_cli("train", "--data", tmp_path / "nope.parquet", "--out", tmp_path / "o"),
                          f"{tmp_path / 'nope.parquet'}: no such file")


@pytest.mark.faults  # an interruption
def test_cli_train_interrupted_then_resumed_finishes_the_run(workspace):
    """Ctrl-C after epoch 1, then --resume: every epoch exactly once in metrics.json."""
    import signal
    import subprocess
    import time

    from tests.cli import ROOT, cli_command, cli_env

    out = workspace / "interrupted"
    config = workspace / "long.yaml"
    config.write_text(yaml.safe_dump({**SMALL, "train": {**SMALL["train"], "epochs": 40}}))  # outlasts the polling
    args = ["train", "--data", workspace / "bars.parquet", "--out", out]
    running = subprocess.Popen(cli_command(*args, "--config", config), cwd=ROOT, env=cli_env(),
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,  # Ctrl-C as in a terminal,
                               # even when the suite runs with &
                               preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        metrics = out / "metrics.json"
        if metrics.exists() and any(m["epoch"] >= 1 for m in json.loads(metrics.read_text())):
            break
        time.sleep(0.2)
    running.send_signal(signal.SIGINT)
    _, stderr = running.communicate(timeout=120)
    assert running.returncode == 130, stderr
    assert stderr.strip() == f"interrupted; continue with --resume --out {out}"
    done = run_cli(*args, "--resume")
    assert done.returncode == 0, done.stderr
    assert [m["epoch"] for m in json.loads((out / "metrics.json").read_text())] == list(range(41))


def test_cli_train_out_that_is_a_file_is_one_line_exit_2(workspace, tmp_path):
    out = tmp_path / "taken"
    out.write_text("not a folder")
    assert_one_line_error(run_cli("train", "--data", workspace / "bars.parquet", "--out", out),
                          f"--out {out} is a file, the output must be a folder")
    assert out.read_text() == "not a folder"


@pytest.mark.faults  # a damaged checkpoint
def test_cli_train_resume_from_a_damaged_checkpoint_is_one_line_exit_2(workspace):
    out = workspace / "damaged"
    assert run_cli("train", "--data", workspace / "bars.parquet", "--config", workspace / "small.yaml",
                   "--epochs", "1", "--out", out).returncode == 0
    (out / "last.pt").write_bytes((out / "last.pt").read_bytes()[:100])
    assert_one_line_error(run_cli("train", "--data", workspace / "bars.parquet", "--out", out, "--resume"),
                          f"{out / 'last.pt'}: cannot load the checkpoint")


@pytest.mark.faults  # bad input on resume
def test_cli_train_resume_on_other_data_is_one_line_exit_2(workspace, tmp_path):
    out = workspace / "mismatch"
    assert run_cli("train", "--data", workspace / "bars.parquet", "--config", workspace / "small.yaml",
                   "--epochs", "1", "--out", out).returncode == 0
    other = tmp_path / "other.parquet"
    run_cli("data", "synth", "--out", other, "--bars", "1500", "--seed", "5")
    assert_one_line_error(run_cli("train", "--data", other, "--out", out, "--resume"),
                          f"{out / 'last.pt'} was trained with other data")


@pytest.mark.skipif(torch.cuda.is_available(), reason="on a CUDA GPU machine --device cuda is valid")
def test_cli_train_cuda_without_a_gpu_is_refused_before_any_work(workspace, tmp_path):
    out = tmp_path / "cuda"
    assert_one_line_error(run_cli("train", "--data", workspace / "bars.parquet", "--device", "cuda", "--out", out),
                          "device 'cuda' was asked for but no CUDA GPU is available")
    assert not out.exists()


def test_cli_train_on_a_gpu_machine_whose_torch_sees_no_gpu_is_refused_before_any_work(workspace, tmp_path):
    """nvidia-smi answers (a fake one, first on PATH) and this torch sees no GPU (a CPU build; a CUDA build with the
    GPUs hidden): `--device auto` would train on the CPU while its user thinks it uses the GPU; one line naming both
    versions instead."""
    out = tmp_path / "auto"
    done = run_cli("train", "--data", workspace / "bars.parquet", "--device", "auto", "--out", out,
                   env=cli_env(**blind_gpu_env(tmp_path / "bin")))
    what, fix = blind_gpu_verdict()  # a CPU build: the CPU-only line; a CUDA build: "sees none"
    assert_one_line_error(done, what)
    assert f"; fix: {fix}" in done.stderr, done.stderr
    assert not out.exists()


TINY = {"data": {"window": 32, "horizon": 6},
        "model": {"d_model": 16, "n_layers": 1, "d_state": 16, "headdim": 16, "chunk_size": 16},
        "train": {"epochs": 4, "batch_size": 128, "lr": 0.003, "warmup_fraction": 0.3}}  # a schedule of 4 epochs


def winner_yaml(folder, **tuned) -> object:
    """best.yaml of trial abc123 of sweep t, TINY's schedule, best at epoch 2; `tuned` over its tuned: section."""
    path = folder / f"best-{len(list(folder.glob('best-*.yaml')))}.yaml"
    path.write_text(yaml.safe_dump({**TINY, "tuned": {"sweep": "t", "trial": "abc123", "best_epoch": 2,
                                                      "best_val_loss": 0.5, **tuned}}))
    return path


def test_cli_train_refit_and_winner_follow_the_trial_schedule_and_stop_at_its_best_epoch(workspace):
    """The selected trial trained TINY's 4-epoch warmup and cosine and was best at epoch 2: `train --config best.yaml`
    and `--refit` (on the training and validation segments together: more steps an epoch) train under that schedule,
    with the trial's learning rate at the end of every epoch, and stop after epoch 2; the refit ships its last epoch."""
    bars = workspace / "bars.parquet"
    (workspace / "tiny.yaml").write_text(yaml.safe_dump(TINY))
    trial = run_cli("train", "--data", bars, "--config", workspace / "tiny.yaml", "--out", workspace / "trial")
    assert trial.returncode == 0, trial.stderr
    best = winner_yaml(workspace)
    out = workspace / "refit"
    done = run_cli("train", "--data", bars, "--config", best, "--out", out, "--refit")
    assert done.returncode == 0, done.stderr
    assert "refit: training on the training and validation segments together under trial abc123's schedule (4 " \
           "epochs' warmup and cosine), stopped at its best epoch, 2" in done.stdout
    winner = run_cli("train", "--data", bars, "--config", best, "--out", workspace / "winner")
    assert winner.returncode == 0, winner.stderr
    n_train = {name: int(text.split("data: ")[1].split(" bars, ")[1].split(" training")[0].replace(",", ""))
               for name, text in (("refit", done.stdout), ("trial", trial.stdout))}
    n_val = int(trial.stdout.split(" training, ")[1].split(" validation")[0].replace(",", ""))
    assert n_train["refit"] > n_train["trial"] + n_val  # the validation samples and the gap before them joined
    trial_lr = [m["lr"] for m in json.loads((workspace / "trial" / "metrics.json").read_text())]
    for run in ("refit", "winner"):
        metrics = json.loads((workspace / run / "metrics.json").read_text())
        assert [m["epoch"] for m in metrics] == [0, 1, 2], run  # stopped at the best epoch, not the schedule's 4
        torch.testing.assert_close(torch.tensor([m["lr"] for m in metrics], dtype=torch.float64),
                                   torch.tensor(trial_lr[:3], dtype=torch.float64))
    best_pt, last_pt = (torch.load(out / name, weights_only=True) for name in ("best.pt", "last.pt"))
    assert best_pt["epoch"] == 2 and all(torch.equal(best_pt["model"][k], v) for k, v in last_pt["model"].items())
    saved = TrainingRecipe.from_yaml(out / "config.yaml")  # a resume of it is a refit again, on the same schedule
    assert saved.tuned.refit and saved.train.epochs == 4 and saved.tuned.last_epoch == 2
    resumed = run_cli("train", "--data", bars, "--out", out, "--resume")
    assert resumed.returncode == 0 and "refit: training on the training and validation segments" in resumed.stdout
    assert [m["epoch"] for m in json.loads((out / "metrics.json").read_text())] == [0, 1, 2]
    assert_one_line_error(run_cli("train", "--data", bars, "--config", workspace / "small.yaml",
                                  "--out", workspace / "no-refit", "--refit"),
                          "--refit trains a sweep's winner up to its best epoch")


@pytest.mark.parametrize(("extra", "match"), [
    (["--epochs", "5"], "--epochs 5 is past the end of its schedule (train.epochs 4)"),
    (["--epochs", "0"], "--epochs 0: the epoch a sweep's winner stops at must be 1 to its schedule's 4"),
    (["--set", "train.epochs=1"], "trial abc123's best epoch, 2, is past the end of its schedule (train.epochs 1)"),
])
def test_cli_train_winner_stop_past_its_schedule_is_one_line_exit_2(workspace, tmp_path, extra, match):
    out = tmp_path / "out"
    assert_one_line_error(run_cli("train", "--data", workspace / "bars.parquet", "--config", winner_yaml(tmp_path),
                                  "--out", out, *extra), match)
    assert not out.exists()


@pytest.mark.faults  # a second look at held-out bars, refused or counted
def test_cli_train_winner_on_its_sweep_bars_scores_the_test_segment_only_as_a_counted_look(workspace, tmp_path):
    """On the bars its sweep ran on, a winner's run scores the test segment only with --look, which adds a look to
    the sweep's test.json (by train, never taken for the sweep's own) and says `look k of n`; without it, no test
    figures and the command that takes them. The look is logged to the sweep's MLflow run at once: test_looks
    counts it, the run's test_loss stays the sweep's own look's."""
    from tuning.bars_file import sha256_of
    from tuning.sweep.manifest import SweepManifest
    from tuning.sweep_files import latest_look
    from tuning.tracking.log import SWEEP_KEY, TrackingLog
    from tuning.tracking.runs import log_test_look
    from tuning.tracking.store import open_store, resolve_store

    bars = workspace / "bars.parquet"
    sweep = tmp_path / "sweeps" / "t"
    sweep.mkdir(parents=True)
    (tmp_path / "mlflow").mkdir()
    manifest = SweepManifest.new("t", bars, {}, 8, str(tmp_path / "sweeps"), f"sqlite:///{tmp_path}/mlflow/mlflow.db",
                                 {}, None)
    (sweep / "sweep.json").write_text(json.dumps(manifest.to_dict()))
    first = {"look": 1, "time": "2026-01-01T00:00:00+00:00", "trials": 8, "trial_id": "abc123", "best_epoch": 2,
             "test_loss": 0.5, "baseline_har": 0.6, "baseline_persistence": 0.9, "baseline_mean": 1.0, "n_test": 113}
    (sweep / "test.json").write_text(json.dumps([first]))
    store = resolve_store(manifest.tracking_uri)
    client = open_store(store)
    experiment = store.experiment_id(client, "t")
    log = TrackingLog(client, experiment, manifest.sweep_id, tmp_path / "spool.jsonl")  # the sweep's run, its look
    log.start_run(SWEEP_KEY, "t sweep", tags={"mamba_tune.objective": "mse_log"})  # a sweep of this version
    log_test_look(log, [first], None)
    assert log.close(timeout_s=30) == 0
    best = winner_yaml(tmp_path, data_sha256=sha256_of(bars))
    out = tmp_path / "winner"
    done = run_cli("train", "--data", bars, "--config", best, "--out", out, "--epochs", "1")
    assert done.returncode == 0, done.stderr
    assert "test           not scored: the test segment of these bars is the one sweep t held out" in done.stdout
    assert f"take it with: mamba-tune train --data {bars} --out {out} --resume --look" in done.stdout
    assert not (out / "test.json").exists() and json.loads((sweep / "test.json").read_text()) == [first]
    looked = run_cli("train", "--data", bars, "--out", out, "--resume", "--look", "--storage", tmp_path / "sweeps")
    assert looked.returncode == 0, looked.stderr
    assert "look 2 of 2 at the test segment of sweep t: test loss " in looked.stdout
    assert "test segment: winner " in looked.stdout and " vs HAR " in looked.stdout
    looks = json.loads((sweep / "test.json").read_text())
    assert looks[0] == first and (looks[1]["look"], looks[1]["by"], looks[1]["trial_id"]) == (2, "train", "abc123")
    assert looks[1]["out"] == str(out.resolve()) and looks[1]["n_test"] == 113
    assert {"dm_stat", "dm_pvalue", "ratio", "dm_fallback"} <= set(looks[1]["vs_har"])
    assert json.loads((out / "test.json").read_text()) == looks[1]
    assert latest_look(sweep, "abc123") == first  # the sweep's own look is still the one of its trial
    assert not (sweep / "driver.json").exists()  # the mark the look held is gone
    (run,) = client.search_runs([experiment])
    assert {m.step: m.value for m in client.get_metric_history(run.info.run_id, "test_looks")} == {0: 1.0, 1: 2.0}
    assert [(m.step, m.value) for m in client.get_metric_history(run.info.run_id, "test_loss_mse_log")] == [(0, 0.5)]
    assert "test_ratio_har" not in client.get_run(run.info.run_id).data.metrics  # the train look's: test.json only


@pytest.mark.faults  # bad input
def test_cli_train_look_without_a_sweep_test_segment_to_count_it_is_one_line_exit_2(workspace, tmp_path):
    bars = workspace / "bars.parquet"
    cases = [
        (["--config", workspace / "small.yaml", "--look"], "--look counts a look at the test segment a sweep held "
         "out, and the configuration is no sweep's winner (no tuned: section); drop --look"),
        (["--config", winner_yaml(tmp_path, data_sha256="0" * 64), "--look"], f"--look counts a look at the test "
         f"segment a sweep held out, and {bars} is not the file sweep t ran on"),
        (["--config", winner_yaml(tmp_path), "--look", "--storage", tmp_path / "none"],
         f"--look adds a look to sweep t's test.json, and {tmp_path / 'none' / 't'} holds no sweep (no sweep.json)"),
        (["--config", winner_yaml(tmp_path), "--storage", tmp_path], "--storage says where the sweep of --look lives, "
         "and --look is not given"),
    ]
    for extra, match in cases:
        out = tmp_path / "out"
        assert_one_line_error(run_cli("train", "--data", bars, "--out", out, *extra), match)
        assert not out.exists()
