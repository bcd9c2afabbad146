"""What MLflow logging costs a sweep per epoch and per trial, embedded store and a real server side by side.

    .venv/bin/python bench/tracking_overhead.py [--epochs 50] [--trials 5]

For each store: a parent run and --trials nested trial runs, each logging --epochs epochs of
the sweep's metrics through TrackingLog, then a trial's end (tags, best.pt of the smoke model,
config.yaml, loss_curve.png, end). Reports, as medians:
  enqueue_us     what the sweep's driver waits per epoch (the writes are sent by a thread)
  send_ms        one epoch's metrics sent and stored (log_epoch to flush)
  trial_end_ms   a trial's end: the loss-curve PNG drawn and its artifacts stored
Prints JSON.
"""

from __future__ import annotations

import argparse
import json
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from model.config import ModelConfig  # noqa: E402
from model.forecaster import Forecaster  # noqa: E402
from tuning.tracking.log import SWEEP_KEY, TrackingLog  # noqa: E402
from tuning.tracking.plots import loss_curve  # noqa: E402
from tuning.tracking.store import EPOCH_METRICS, open_store, resolve_store  # noqa: E402


def measure(uri: str, folder: Path, epochs: int, trials: int) -> dict:
    store = resolve_store(uri, folder)
    client = open_store(store)
    log = TrackingLog(client, store.experiment_id(client, f"bench-{time.time_ns()}"), "bench", folder / "spool.jsonl")
    log.start_run(SWEEP_KEY, "bench sweep", params={"trials": trials})
    checkpoint = folder / "best.pt"  # the smoke space's model, as a trial's best.pt
    torch.save({"model": Forecaster(ModelConfig(d_model=32, n_layers=2, d_state=16, headdim=16,
                                                chunk_size=16)).state_dict()}, checkpoint)
    enqueue, send, trial_end = [], [], []
    for trial in range(trials):
        key = f"trial{trial}"
        log.start_run(key, key, parent=SWEEP_KEY, params={"learning_rate": 1e-3, "batch_size": 64})
        assert log.flush(60)
        history = []
        for epoch in range(epochs + 1):
            metrics = {name: 1.0 / (epoch + 1) for name in EPOCH_METRICS}
            history.append({**metrics, "epoch": epoch, "best_epoch": epoch, "baseline_persistence": 0.5})
            start = time.perf_counter()
            log.log_epoch(key, epoch, metrics)
            enqueue.append((time.perf_counter() - start) * 1e6)
            assert log.flush(60)
            send.append((time.perf_counter() - start) * 1e3)
        start = time.perf_counter()
        staged = folder / key
        staged.mkdir()
        (staged / "config.yaml").write_text("train: {lr: 0.001}\n")
        (staged / "best.pt").write_bytes(checkpoint.read_bytes())
        loss_curve(history, staged / "loss_curve.png", key)
        log.set_tags(key, {"stop_reason": "completed", "stop_epoch": epochs})
        for name, folder_name in (("best.pt", "checkpoint"), ("config.yaml", None), ("loss_curve.png", None)):
            log.log_artifact(key, staged / name, folder_name, remove_after=True)
        log.end_run(key, "FINISHED")
        assert log.flush(60)
        trial_end.append((time.perf_counter() - start) * 1e3)
    log.close(10)
    return {"enqueue_us": round(statistics.median(enqueue), 1), "send_ms": round(statistics.median(send), 2),
            "send_ms_p90": round(sorted(send)[int(0.9 * len(send))], 2),
            "trial_end_ms": round(statistics.median(trial_end), 1), "checkpoint_kb": checkpoint.stat().st_size // 1024}


def start_server(folder: Path) -> tuple[subprocess.Popen, str]:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    server = subprocess.Popen([sys.executable, "-m", "mlflow", "server", "--backend-store-uri",
                               f"sqlite:///{folder / 'server.db'}", "--artifacts-destination",
                               str(folder / "artifacts"), "--host", "127.0.0.1", "--port", str(port),
                               "--workers", "1"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    for _ in range(240):
        try:
            urllib.request.urlopen(f"{url}/health", timeout=2).close()
            return server, url
        except OSError:
            time.sleep(0.5)
    raise RuntimeError("mlflow server did not start")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=50)
    parser.add_argument("--trials", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        (root / "embedded").mkdir()
        (root / "server").mkdir()
        embedded = measure(f"sqlite:///{root / 'embedded' / 'mlflow.db'}", root / "embedded", args.epochs, args.trials)
        server, url = start_server(root / "server")
        try:
            remote = measure(url, root / "server", args.epochs, args.trials)
        finally:
            server.terminate()
            server.wait()
    print(json.dumps({"epochs_per_trial": args.epochs, "trials": args.trials, "embedded_sqlite": embedded,
                      "mlflow_server": remote,
                      "send_ratio_server_to_embedded": round(remote["send_ms"] / embedded["send_ms"], 2)}, indent=1))


if __name__ == "__main__":
    main()
