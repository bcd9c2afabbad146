"""A sweep without --notify stopped by SIGTERM (`kill`, `ray job stop`, a pod's deletion) mid-sweep stops as Ctrl-C
stops it: exit 130, resumable, and `resume` finishes it. Its driver runs with SIGINT blocked, as a driver that
`ray job submit` started does (Ray blocks SIGINT in its processes, and a job's entrypoint inherits that)."""

from __future__ import annotations

import json
import signal
import subprocess
import time

from tests.cli import ROOT, cli_command, cli_env, run_cli
from tests.tuning.sweeps import ledger, state_listed, sweep_run, write_space
from tuning.sweep_files import LEDGER, TEST_LOOK


def test_sigterm_stops_a_sweep_without_notify_as_ctrl_c_does_and_resume_finishes_it(bars, tmp_path):
    space = write_space(tmp_path, trials=2, resources={"max_concurrent": 1})
    storage, uri = tmp_path / "sweeps", f"sqlite:///{tmp_path / 'mlflow.db'}"
    process = subprocess.Popen(cli_command("sweep", "--data", bars, "--space", space, "--storage", storage,
                                           "--tracking-uri", uri),
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT, env=cli_env(),
                               preexec_fn=lambda: signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT}))
    deadline = time.monotonic() + 600
    while not (storage / "t" / LEDGER).exists() and process.poll() is None and time.monotonic() < deadline:
        time.sleep(0.5)  # its first trial ended
    assert process.poll() is None, process.communicate()[1][-3000:]

    process.send_signal(signal.SIGTERM)
    _, stderr = process.communicate(timeout=300)
    assert process.returncode == 130, stderr[-3000:]
    assert stderr.strip().splitlines()[-1].startswith("interrupted with ") and "mamba-tune resume t" in stderr
    assert 1 <= len(ledger(storage / "t")) < 2 and state_listed(storage) == "interrupted"

    resumed = run_cli("resume", "t", "--storage", storage)  # to the sweep's own store (sweep.json)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert state_listed(storage) == "finished"
    looks = json.loads((storage / "t" / TEST_LOOK).read_text())
    assert sweep_run(uri).data.metrics["test_looks"] == len(looks) == 1
