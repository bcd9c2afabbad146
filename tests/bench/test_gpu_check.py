"""bench/gpu_check.py run as a person runs it, here without CUDA: the report after each section, the GPU
sections "skipped: no CUDA", the CPU parts real, --cpu-smoke's code paths of sections 4-6, a section's timeout.

CUDA is hidden from the script where it enters (CUDA_VISIBLE_DEVICES=""), so the test says the same on a
machine with a GPU.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "bench" / "gpu_check.py"
ORDER = ["environment", "parity", "forecaster", "epoch", "memory", "sweep"]
DONE = ("ok", "skipped", "error", "timed out")
NO_CUDA = "skipped: no CUDA"

pytestmark = pytest.mark.faults


def run_check(tmp_path: Path, *args: str) -> tuple[int, list[dict], dict, str]:
    """The script as a subprocess; every distinct state of its report file seen while it ran, the final
    report, its stdout parsed; -> (exit code, snapshots, report, stderr)."""
    out, stdout, stderr = tmp_path / "report.json", tmp_path / "stdout", tmp_path / "stderr"
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": ""}
    snapshots: list[dict] = []
    with open(stdout, "w") as so, open(stderr, "w") as se:
        process = subprocess.Popen([sys.executable, str(SCRIPT), "--out", str(out), *args], stdout=so, stderr=se,
                                   cwd=tmp_path, env=env)
        while process.poll() is None:
            if out.exists():
                state = json.loads(out.read_text())  # written through a temporary file: never half a report
                if not snapshots or state != snapshots[-1]:
                    snapshots.append(state)
            time.sleep(0.05)
    report = json.loads(out.read_text())
    assert json.loads(stdout.read_text()) == report
    return process.returncode, snapshots, report, stderr.read_text()


def statuses(report: dict) -> list[str]:
    return [entry["status"] for entry in report["sections"].values()]


@pytest.mark.integration  # the sweep section runs a real local Ray and an MLflow store
def test_gpu_check_cpu_smoke_reports_after_each_section_and_runs_every_cpu_path(tmp_path):
    code, snapshots, report, stderr = run_check(tmp_path, "--cpu-smoke")
    assert code == 0, stderr
    assert list(report["sections"]) == ORDER and report["finished"] and report["problems"] == []
    # -- written after each section: sections finish in order, and the file showed the early ones done first --
    for state in snapshots:
        done = [s in DONE for s in statuses(state)]
        assert done == sorted(done, reverse=True), statuses(state)  # a prefix of the sections is done
    assert any(statuses(s)[0] == "ok" and statuses(s)[-1] in ("pending", "running") for s in snapshots), \
        [statuses(s) for s in snapshots]
    sections = report["sections"]
    # -- 1: the environment, real: this venv's torch, no CUDA, each kernel import's outcome ----------------
    environment = sections["environment"]["result"]
    assert environment["torch"] == torch.__version__ and environment["cuda_available"] is False
    assert environment["python"] == sys.version.split()[0] and environment["auto_backend"] == "torch"
    assert set(environment["imports"]) == {"mamba_ssm", "causal_conv1d"}
    for name, outcome in environment["imports"].items():  # an import that fails is named in the kernel's why
        assert (outcome["import"] == "ok") == (f"import {name}:" not in environment["fused_kernel"]), environment
    assert environment["triton_launch"] == NO_CUDA
    # -- 2: parity needs the fused kernel on CUDA ---------------------------------------------------------
    assert sections["parity"]["status"] == "skipped" and sections["parity"]["detail"] == NO_CUDA
    # -- 3: the Forecaster's CPU checkpoint round trip is exact; its GPU parts skipped -------------------
    forecaster = sections["forecaster"]["result"]
    assert forecaster["cpu"]["backend"] == "torch" and forecaster["cpu"]["round_trip"]["within"] is True
    assert forecaster["cpu"]["round_trip"]["max_abs_diff"] == 0.0
    assert forecaster["backends_on_gpu"] == NO_CUDA and forecaster["gpu_checkpoint_on_cpu"] == NO_CUDA
    # -- 4: epoch times of the torch path, training and validation apart; the fused path skipped ---------
    epoch = sections["epoch"]["result"]
    assert epoch["runs"]["mamba_ssm/fp32"] == NO_CUDA and epoch["runs"]["mamba_ssm/bf16"] == NO_CUDA
    for precision in ("fp32", "bf16"):
        times = epoch["runs"][f"torch/{precision}"]
        assert times["train_s"] > 0 and times["val_s"] > 0 and times["samples_per_s"] > 0
        assert times["train_s"] + times["val_s"] == pytest.approx(times["epoch_s"], abs=0.002)
    assert epoch["workload"]["batch_size"] == 64 and epoch["workload"]["train_samples"] > 0
    # -- 5: peaks measured at each batch size, the packing, one process and the packed ones trained --------
    memory = sections["memory"]["result"]
    for precision in ("fp32", "bf16"):
        assert set(memory["peaks_mb"][precision]) == {"16", "32"}
        assert all(peak > 0 for peak in memory["peaks_mb"][precision].values())
    packing = memory["packing"]
    assert packing["batch_size"] in (16, 32) and 1 <= packing["trials_per_gpu"] <= 2
    assert memory["single"]["processes"][0]["status"] == "completed"
    if packing["trials_per_gpu"] == 2:
        assert [p["status"] for p in memory["packed"]["processes"]] == ["completed", "completed"]
        assert memory["packed"]["out_of_memory"] == 0 and memory["packed"]["combined_samples_per_s"] > 0
    # -- 6: the sweep through the real CLI: two trials, a winner --------------------------------------------
    sweep = sections["sweep"]["result"]
    assert sweep["exit_code"] == 0, sweep["output_tail"]
    assert len(sweep["trials"]) == 2 and any(line.startswith("memory probe on cpu") for line in sweep["lines"])


def test_gpu_check_without_smoke_skips_gpu_sections_and_honours_a_section_timeout(tmp_path):
    code, _, report, stderr = run_check(tmp_path, "--timeout", "forecaster=0.001")
    assert code == 0, stderr
    sections = report["sections"]
    assert sections["environment"]["status"] == "ok" and sections["environment"]["result"]["cuda_available"] is False
    assert sections["forecaster"]["status"] == "timed out"
    assert sections["forecaster"]["detail"] == "timed out after 0.001 s"
    for name in ("parity", "epoch", "memory", "sweep"):  # after the timed-out section the check went on
        assert (sections[name]["status"], sections[name]["detail"]) == ("skipped", NO_CUDA)
    assert report["problems"] == ["forecaster: timed out after 0.001 s"]


def test_gpu_check_refuses_an_unknown_section_timeout(tmp_path):
    done = subprocess.run([sys.executable, str(SCRIPT), "--timeout", "warp=3"], capture_output=True, text=True,
                          cwd=tmp_path)
    assert done.returncode == 2
    assert "error: --timeout warp=3: give SECTION=SECONDS, SECTION one of environment" in done.stderr
    assert "Traceback" not in done.stderr and not (tmp_path / "gpu_check.json").exists()
