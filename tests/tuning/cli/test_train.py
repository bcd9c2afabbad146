"""`mamba-tune train` end to end: files in --out, resume, and one-line errors."""

from __future__ import annotations

import json

import pytest
import torch
import yaml

from tests.cli import assert_one_line_error, run_cli
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
        (["--set", "train.lr=-1"], None, "{config} (with --set train.lr=-1): train: lr must be in (0, 1), got -1"),
        (["--set", "model.d_modle=32"], None, "{config} (with --set model.d_modle=32): model: unknown model "
         "setting 'd_modle'; allowed:"),
        (["--set", "train"], None, "--set 'train' is not KEY=VALUE with a dotted key"),
        (["--batch-size", "0"], None, "train: batch_size must be a positive integer, got 0"),
        ([], "data: {window: 32\n", "{config}: invalid YAML at line 2"),
        ([], "model: {d_modle: 32}\n", "{config}: model: unknown model setting 'd_modle'; allowed:"),
        ([], "optimizer: {}\n", "{config}: unknown section 'optimizer'; allowed: data, model, train"),
        ([], "model: {headdim: 48}\n", "{config}: model: headdim must divide expand*d_model"),
        ([], "data: {window: 5000}\n", "{data}: 1500 bars are too few"),
        (["--resume"], None, "{out} holds no checkpoint (last.pt) to resume"),
        ([], "model: {backend: mamba_ssm}\ndata: {window: 32}\n", "backend 'mamba_ssm' cannot run"),
        ([], "train: {eps: .nan}\n", "{config}: train: eps must be a positive number, got nan"),
        ([], "model: {rmsnorm: 'no'}\n", "{config}: model: rmsnorm must be true or false, got 'no'"),
        ([], "data: {columns: {timestamp: 5}}\n", "{config}: data: columns must map bar fields"),
        ([], "data: {window: 16, vol_lookbacks: [1, 5, 22]}\n",
         "{config}: data: vol_lookbacks: a lookback of 22 bars is longer than the window of 16 bars"),
        ([], "data: {window: 16, vol_lookbacks: [1, 4], leverage_lookbacks: [1, 5, 22]}\n",
         "{config}: data: leverage_lookbacks: a lookback of 22 bars is longer than the window of 16 bars"),
        ([], "data: {residual_to: persistence}\n", "{config}: data: residual_to must be one of har, none"),
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


def test_cli_train_refit_trains_training_and_validation_for_the_best_epoch_count(workspace):
    """A sweep's best.yaml names its trial's best epoch (`tuned:`); --refit trains that many epochs on the training
    and validation segments together, ships the last epoch as best.pt and scores it on the test segment."""
    best = {**SMALL, "train": {**SMALL["train"], "epochs": 4},
            "tuned": {"sweep": "t", "trial": "abc123", "best_epoch": 2, "best_val_loss": 0.5}}
    (workspace / "best.yaml").write_text(yaml.safe_dump(best))
    out = workspace / "refit"
    done = run_cli("train", "--data", workspace / "bars.parquet", "--config", workspace / "best.yaml", "--out", out,
                   "--refit")
    assert done.returncode == 0, done.stderr
    assert "refit: training on the training and validation segments together for 2 epochs (the best epoch count " \
           "of trial abc123)" in done.stdout
    plain = run_cli("train", "--data", workspace / "bars.parquet", "--config", workspace / "small.yaml", "--out",
                    workspace / "plain-for-refit")
    n_train = {name: int(text.split("data: ")[1].split(" bars, ")[1].split(" training")[0].replace(",", ""))
               for name, text in (("refit", done.stdout), ("plain", plain.stdout))}
    n_val = int(plain.stdout.split(" training, ")[1].split(" validation")[0].replace(",", ""))
    assert n_train["refit"] > n_train["plain"] + n_val  # the validation samples and the gap before them joined
    metrics = json.loads((out / "metrics.json").read_text())
    assert [m["epoch"] for m in metrics] == [0, 1, 2]  # the best epoch count, not the schedule's 4
    best_pt, last_pt = (torch.load(out / name, weights_only=True) for name in ("best.pt", "last.pt"))
    assert best_pt["epoch"] == 2 and all(torch.equal(best_pt["model"][k], v) for k, v in last_pt["model"].items())
    assert set(json.loads((out / "test.json").read_text())) >= {"test_loss", "baseline_har"}
    saved = TrainingRecipe.from_yaml(out / "config.yaml")  # a resume of it is a refit again
    assert saved.tuned.refit and saved.train.epochs == 2
    resumed = run_cli("train", "--data", workspace / "bars.parquet", "--out", out, "--resume")
    assert resumed.returncode == 0 and "refit: training on the training and validation segments" in resumed.stdout
    assert_one_line_error(run_cli("train", "--data", workspace / "bars.parquet", "--config", workspace / "small.yaml",
                                  "--out", workspace / "no-refit", "--refit"),
                          "--refit trains a sweep's winner for its best epoch count")
