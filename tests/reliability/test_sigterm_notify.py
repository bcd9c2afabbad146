"""A notifying sweep stopped by SIGTERM (`kill`, `ray job stop`) mid-sweep: it stops as Ctrl-C stops it (exit 130,
resumable), its webhook is told `interrupted` once, and the webhook URL, a secret, is in no MLflow artifact and no
file of the sweep (sweep.json, Ray Tune's state): `resume` takes it from the environment again."""

from __future__ import annotations

import json
import signal

import mlflow
import yaml

from tests.cli import cli_env, run_cli
from tests.tuning.sweeps import ledger, start_after_first_trial, state_listed, write_space
from tests.tuning.webhook_server import Webhook
from tuning.sweep_files import MANIFEST

SECRET = "SECRETTOKEN"  # the last part of the test webhook's path (tests/tuning/webhook_server.py)


def test_sigterm_stops_a_notifying_sweep_as_ctrl_c_does_and_tells_its_webhook_interrupted(bars, tmp_path):
    webhook = Webhook()
    try:
        space = write_space(tmp_path, trials=2, resources={"max_concurrent": 1})
        values = yaml.safe_load(space.read_text())
        space.write_text(yaml.safe_dump({**values, "notify": {"webhook": webhook.url}}))
        storage = tmp_path / "sweeps"
        process = start_after_first_trial("--data", bars, "--space", space, "--storage", storage)
        assert process.poll() is None, process.communicate()[1][-3000:]
        process.send_signal(signal.SIGTERM)
        stdout, stderr = process.communicate(timeout=300)
        assert process.returncode == 130, stderr[-3000:]
        assert stderr.strip().splitlines()[-1].startswith("interrupted with ") and "mamba-tune resume t" in stderr
        assert SECRET not in stdout + stderr  # only the webhook's host is ever printed

        ((path, body),) = webhook.received
        assert path.endswith(SECRET) and (body["sweep"], body["status"]) == ("t", "interrupted")
        assert body["trials"] == len(ledger(storage / "t")) and body["trials_asked"] == 2
        assert state_listed(storage) == "interrupted"
        manifest = json.loads((storage / "t" / MANIFEST).read_text())
        assert "notify" not in manifest["space"] and manifest["webhook_set"] is True  # that one was set, no more
        holding = [str(f) for f in storage.rglob("*") if f.is_file() and SECRET.encode() in f.read_bytes()]
        assert holding == []  # sweep.json, trials.json, Ray Tune's experiment state and pickles

        client = mlflow.MlflowClient()
        experiment = client.get_experiment_by_name("t").experiment_id
        (parent,) = client.search_runs([experiment], "tags.`mamba_tune.role` = 'sweep'")
        logged = yaml.safe_load(open(client.download_artifacts(parent.info.run_id, "space.yaml", str(tmp_path))))
        assert "notify" not in logged and logged["trials"] == 2
        assert not any(SECRET in str(value) for value in parent.data.params.values())

        resumed = run_cli("resume", "t", "--storage", storage, env=cli_env(MAMBA_TUNE_WEBHOOK=webhook.url))
        assert resumed.returncode == 0, resumed.stderr[-3000:]
        assert [b["status"] for _, b in webhook.received] == ["interrupted", "ended"]
        assert SECRET not in resumed.stdout + resumed.stderr
    finally:
        webhook.stop()
