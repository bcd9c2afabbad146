"""`mamba-tune doctor` on this machine (a local Ray started for the check); the cluster case is in tests/cluster."""

from __future__ import annotations

import pytest

from tests.cli import assert_one_line_error, cli_env, run_cli
from tests.tuning.cluster.fake_gpu import blind_gpu_env, blind_gpu_verdict
from tests.tuning.mlflow_server import free_port

pytestmark = pytest.mark.integration


@pytest.mark.faults  # a Ray started for the check alone: the doctor of clusters (make test within 12 minutes)
def test_doctor_on_one_machine_reports_its_node_and_passes(tmp_path):
    done = run_cli("doctor", "--storage", tmp_path / "sweeps", "--tracking-uri", f"sqlite:///{tmp_path / 'mlflow.db'}")
    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == "mamba-tune doctor: a local Ray started for this check"
    assert sum(", head on " in line for line in lines) == 1 and not any(", worker on " in line for line in lines)
    assert any(line.startswith("  ok    versions here: python 3.") and "torch " in line and "optuna " in line
               for line in lines)
    assert f"  ok    storage {tmp_path / 'sweeps'}: written and read back from node(s) " in done.stdout
    assert f"  ok    tracking sqlite:///{tmp_path / 'mlflow.db'}: reachable here" in done.stdout
    assert lines[-1] == "ready for a sweep" and list((tmp_path / "sweeps").iterdir()) == []  # its probe removed


@pytest.mark.faults  # storage and tracking faults
def test_doctor_fails_on_storage_it_cannot_write_and_a_tracking_server_that_does_not_answer(tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    url = f"http://127.0.0.1:{free_port()}"
    done = run_cli("doctor", "--storage", blocker / "sweeps", "--tracking-uri", url)
    assert done.returncode == 1, done.stdout + done.stderr
    assert f"  FAIL  storage {blocker / 'sweeps'}: not writable from node " in done.stdout
    assert f"  FAIL  tracking store {url}: not reachable (" in done.stdout
    assert done.stdout.splitlines()[-1] == ("2 problem(s) a sweep would trip on; fix them and run `mamba-tune "
                                            "doctor` again")
    assert blocker.read_text() == "not a folder"


@pytest.mark.faults  # a GPU node whose torch cannot use its GPU
def test_doctor_fails_a_node_whose_nvidia_smi_answers_and_whose_torch_sees_no_gpu(tmp_path):
    """A fake nvidia-smi first on PATH and any GPU hidden (the local Ray's workers inherit both), and this machine's
    torch, which then sees no GPU whichever build it is."""
    env = cli_env(**blind_gpu_env(tmp_path / "bin"))
    done = run_cli("doctor", "--storage", tmp_path / "sweeps", "--tracking-uri", f"sqlite:///{tmp_path / 'm.db'}",
                   env=env)
    what, fix = blind_gpu_verdict()  # a CPU build: the CPU-only line; a CUDA build: "sees none"
    assert done.returncode == 1, done.stdout + done.stderr
    assert ", 0 GPU (NVIDIA H100 80GB HBM3 80 GiB), " in done.stdout
    assert f": {what}" in done.stdout and f"\n        fix: {fix}" in done.stdout, done.stdout
    assert done.stdout.splitlines()[-1].startswith("1 problem(s) a sweep would trip on")


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--tracking-uri", "ftp://example.org/x"), "tracking URI 'ftp://example.org/x' (--tracking-uri"),
        (("--storage", "https://acct.blob.core.windows.net/sweeps?sp=rwdl&sig=" + "c2lnbmF0dXJl"),
         "--storage https://acct.blob.core.windows.net/sweeps holds credentials (sig)"),  # before a finding prints it
        (("--address", "nowhere"), "--address 'nowhere' is not HOST:PORT or auto"),
        (("--address", f"127.0.0.1:{free_port()}"), "--address 127.0.0.1:"),
    ],
)
def test_doctor_bad_input_is_one_line_and_exit_2(args, message):
    assert_one_line_error(run_cli("doctor", *args, timeout=120), message)


def test_doctor_names_ray_address_when_it_holds_a_dashboard_url():
    done = run_cli("doctor", timeout=120, env=cli_env(RAY_ADDRESS="http://127.0.0.1:8265"))
    assert_one_line_error(done, "RAY_ADDRESS http://127.0.0.1:8265: a dashboard (Jobs API) address; join a cluster")
    assert done.stderr.rstrip().endswith("; unset RAY_ADDRESS for a local Ray")

