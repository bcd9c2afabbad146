"""The oldest Ray mamba-tune admits, tested as a team that runs it would use mamba-tune: a venv of its own with Ray's
oldest admitted minor and the project's wheel (tests/packaging/oldest_ray_env.py) runs a whole sweep on the public
trial path, one trial completing and one stopped by the gate (Tune stops it; the relay ends its run by killing Ray
Train's controller, on that Ray); and a driver of the test venv's Ray refuses that Ray's cluster in one line.

Faults tier: the install counts in its time, one to two minutes here (Ray's wheel comes from PyPI; up to ten on a slow
link; printed with -s), then a sweep of 40 s to 2.5 min (by the load on the cores) and a cluster start and refusal of
about fifteen seconds, on two cores.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from importlib.metadata import version
from pathlib import Path

import pytest

from tests.cli import assert_one_line_error
from tests.packaging.fresh_env import ROOT, build_wheel
from tests.packaging.oldest_ray_env import OldestRay, oldest_ray_env, ray_head
from tests.tuning.mlflow_layout import assert_sweep_logged
from tests.tuning.sweeps import SPACE, STRAIGHT_THROUGH, decisions, ledger, write_space
from tuning.sweep_files import TEST_LOOK

# tests.tuning.sweeps.SPACE cut to its first two initial points, run in order, one at a time: the first completes,
# the gate stops the second at epoch 2 (STRAIGHT_THROUGH); one finalist confirmed on seed 1
TRIALS = 2
CONFIRM = ["--set", "confirm.top_k=1", "--set", "confirm.seeds=[1]"]
BARS, BARS_SEED = 1500, 1  # the bars SPACE's outcomes were measured on (tests/conftest.py: bars)
SWEEP_TIMEOUT_S = 900

WHERE = """
import json, sys, ray, torch, tuning, tuning.cli.main
print(json.dumps({"ray": ray.__version__, "torch": torch.__version__, "path": sys.path,
                  "files": [tuning.__file__, tuning.cli.main.__file__]}))
"""


@pytest.fixture(scope="module")
def oldest(tmp_path_factory) -> OldestRay:
    """The venv of the oldest admitted Ray, checked: that Ray, the CPU torch, mamba-tune from its own
    site-packages, nothing of the test venv's or the checkout's on its sys.path."""
    wheel = build_wheel(tmp_path_factory.mktemp("wheel"))
    built = oldest_ray_env(tmp_path_factory.mktemp("oldest") / "venv", wheel)
    print(f"\nthe venv of Ray {built.floor} installed in {built.install_s:.0f} s")  # the tier's cost: shown with -s
    elsewhere = tmp_path_factory.mktemp("elsewhere")
    done = built.env.run("python", "-c", WHERE, cwd=elsewhere)
    assert done.returncode == 0, done.stderr[-3000:]
    found = json.loads(done.stdout)
    assert found["ray"].startswith(f"{built.floor}.") and found["torch"] == "2.13.0+cpu", found
    assert all(Path(file).is_relative_to(built.env.site_packages) for file in found["files"]), found["files"]
    test_venv = Path(sys.prefix)
    seen = [p for p in found["path"] if p and (Path(p).is_relative_to(test_venv) or Path(p).is_relative_to(ROOT))]
    assert not seen, seen
    return built


@pytest.fixture(scope="module")
def synth_bars(oldest, tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("bars")
    assert not folder.resolve().is_relative_to(ROOT)  # every command here runs outside the checkout
    done = oldest.env.run("mamba-tune", "data", "synth", "--out", "bars.parquet", "--bars", BARS, "--seed", BARS_SEED,
                          cwd=folder)
    assert done.returncode == 0, done.stderr[-3000:]
    return folder / "bars.parquet"


def two_trial_space(folder: Path) -> Path:
    """SPACE's first two trials, one at a time (the order ASHA and the gate see is then fixed), as a YAML file."""
    return write_space(folder, trials=TRIALS, resources={"max_concurrent": 1})


def installed_ray(oldest: OldestRay, cwd: Path) -> str:
    done = oldest.env.run("python", "-c", "import ray; print(ray.__version__)", cwd=cwd)
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout.strip()


@pytest.mark.faults  # 40 s-2.5 min: a two-trial sweep, its confirmation and look, on the public path
@pytest.mark.integration
def test_oldest_ray_runs_a_sweep_end_to_end_on_the_public_path(oldest, synth_bars, tmp_path):
    ray_version = installed_ray(oldest, tmp_path)
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    swept = oldest.env.run("mamba-tune", "sweep", "--data", synth_bars, "--space", two_trial_space(tmp_path), *CONFIRM,
                           "--set", "resources.trial_path=public", "--storage", "sweeps", "--tracking-uri", uri,
                           cwd=tmp_path, timeout=SWEEP_TIMEOUT_S)
    assert swept.returncode == 0, (swept.stdout[-3000:], swept.stderr[-3000:])
    lines = swept.stdout.splitlines()
    assert [line for line in lines if line.startswith("trial path: ")] == \
        [f"trial path: public API (Ray {ray_version}: resources.trial_path is public)"], swept.stdout[-3000:]
    assert "stopping: ASHA (grace 2, reduction 2, max 4 epochs), gate at epoch 2" in lines

    records = ledger(tmp_path / "sweeps" / "t")
    search = {k: r for k, r in records.items() if r["stage"] == "search"}
    confirm = [r for r in records.values() if r["stage"] == "confirm"]
    assert len(search) == TRIALS and len(confirm) == 1 and len(records) == TRIALS + 1, records
    # the first completes at epoch 4; the gate stops the second at epoch 2 (Tune stops it, the relay ends its run)
    assert decisions(search, SPACE["initial"][:TRIALS]) == STRAIGHT_THROUGH[:TRIALS] == [("completed", 4), ("gate", 2)]
    finalist = next(r for r in search.values() if r["stop_reason"] == "completed")
    (confirmed,) = confirm
    assert (confirmed["seed"], confirmed["fold"], confirmed["finalist"]) == (1, 1, finalist["trial_id"]), confirmed
    assert (confirmed["stop_reason"], confirmed["stop_epoch"]) == ("completed", 4), confirmed
    assert f"best: trial {finalist['trial_id']} (the confirmed winner)" in swept.stdout, swept.stdout[-3000:]
    (look,) = json.loads((tmp_path / "sweeps" / "t" / TEST_LOOK).read_text())  # the one look, at the finalist
    assert (look["trial_id"], look["look"], look["trials"]) == (finalist["trial_id"], 1, TRIALS), look
    assert re.search(r"^test segment: winner [\d.]+ vs HAR [\d.]+", swept.stdout, re.M), swept.stdout[-3000:]
    # MLflow, read by the test venv's client: the parent run, a nested run per ledger record, each epoch once
    assert_sweep_logged(uri, "t", records, tmp_path / "downloads")


@pytest.mark.faults  # ~15 s: a Ray head of the old venv, a driver of the test venv's Ray refused by it
@pytest.mark.integration
def test_a_driver_of_another_ray_than_the_clusters_is_refused_in_one_line(oldest, synth_bars, tmp_path):
    cluster_ray, driver_ray = installed_ray(oldest, tmp_path), version("ray")  # the test venv's: 2.60
    assert cluster_ray != driver_ray
    storage = tmp_path / "sweeps"
    with ray_head(oldest.bin / "ray", cwd=tmp_path, log=tmp_path / "ray-head.log",
                  env={**oldest.env.environment(), "RAY_USAGE_STATS_ENABLED": "0"}) as address:
        # the test venv's mamba-tune, in this session's environment, as its user runs it
        done = subprocess.run([str(Path(sys.executable).with_name("mamba-tune")), "sweep", "--data", str(synth_bars),
                               "--space", str(two_trial_space(tmp_path)), "--address", address,
                               "--storage", str(storage)],
                              cwd=tmp_path, capture_output=True, text=True, timeout=SWEEP_TIMEOUT_S)
    python = r"\d+\.\d+\.\d+"
    assert_one_line_error(done, f"--address {address}: the cluster runs Ray {cluster_ray} on Python ")
    assert re.match(rf"error: --address {re.escape(address)}: the cluster runs Ray {re.escape(cluster_ray)} on "
                    rf"Python {python}, this driver Ray {re.escape(driver_ray)} on Python {python}, ", done.stderr), \
        done.stderr
    assert not re.search(r"^trial \w+ started", done.stdout, re.M), done.stdout  # refused before any trial
    assert not storage.exists() or not any(storage.iterdir())  # and before the sweep wrote anything
