"""`mamba-tune ui`: the MLflow UI over the embedded store (runs/mlflow), on 127.0.0.1 unless told otherwise."""

from __future__ import annotations

import argparse
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
import webbrowser
from pathlib import Path

from tuning.cli.help import subcommand
from tuning.errors import UsageError
from tuning.tracking.store import DEFAULT_TRACKING_DIR, TrackingStore, resolve_store

START_TIMEOUT_S = 60


def add_command(commands: argparse._SubParsersAction) -> None:
    ui = subcommand(commands, "ui", "browse sweeps and trials in the MLflow UI",
                     ("mamba-tune ui", "mamba-tune ui smoke  # opens on the sweep's runs",
                      "mamba-tune ui --tracking-uri sqlite:///runs/mlflow/mlflow.db --port 5001"),
                     "Serve the MLflow UI over the embedded store on this machine (127.0.0.1 unless --host says "
                     "otherwise), and open it on a sweep's runs when NAME is given.")
    ui.add_argument("name", nargs="?", help="a sweep: print and open the UI on its runs")
    ui.add_argument("--tracking-uri", help=f"sqlite:///PATH of a store (default: MLFLOW_TRACKING_URI, else "
                    f"{DEFAULT_TRACKING_DIR}/mlflow.db); for an http(s) server, its own UI is used")
    ui.add_argument("--host", default="127.0.0.1",
                    help="interface to serve on (default 127.0.0.1: this machine only; 0.0.0.0 exposes it)")
    ui.add_argument("--port", type=int, default=5000, help="port (default 5000)")
    ui.set_defaults(run=cmd_ui)


def cmd_ui(args: argparse.Namespace) -> int:
    store = resolve_store(args.tracking_uri)
    database = Path(store.uri.removeprefix("sqlite:///"))
    if store.embedded and not database.is_file():
        raise UsageError(f"no MLflow store at {database}; run a sweep first (`make demo`), or pass --tracking-uri "
                         "sqlite:///PATH of the store to browse")
    page = "" if args.name is None else f"/#/experiments/{_experiment_id(store, args.name)}/runs"
    if not store.embedded:
        print(f"{store.uri} is an MLflow server: its UI is at {store.uri}{page}")
        _open(f"{store.uri}{page}", args.name)
        return 0
    if not 0 < args.port < 65536:
        raise UsageError(f"--port {args.port} is not a port number (1-65535)")
    if _in_use(args.host, args.port):
        raise UsageError(f"port {args.port} on {args.host} is already in use; pass another --port")
    command = [sys.executable, "-m", "mlflow", "server", "--backend-store-uri", store.uri,
               "--default-artifact-root", store.artifact_root, "--host", args.host, "--port", str(args.port),
               "--workers", "1"]
    url = f"http://{'127.0.0.1' if args.host in ('0.0.0.0', '::') else args.host}:{args.port}"
    log = tempfile.NamedTemporaryFile(prefix="mamba-tune-ui-", suffix=".log", delete=False)  # noqa: SIM115
    server = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)
    signal.signal(signal.SIGTERM, _exit)  # `kill` of this command stops the server too (the finally below)
    signal.signal(signal.SIGHUP, _exit)
    try:
        if not _wait_healthy(url, server):
            tail = Path(log.name).read_text(errors="replace").strip().splitlines()[-1:]
            print(f"error: the MLflow server did not start ({tail[0] if tail else 'no answer'}); run the command "
                  f"by hand to see why: {' '.join(command)}", file=sys.stderr)
            return 1
        exposed = "" if args.host in ("127.0.0.1", "localhost", "::1") else f" (listening on {args.host}: reachable " \
                                                                            "from other machines)"
        print(f"MLflow UI: {url}{exposed}\nstore: {store.uri}\nCtrl-C stops it", flush=True)
        _open(f"{url}{page}", args.name)
        server.wait()
        return 0 if server.returncode == 0 else 1
    except KeyboardInterrupt:
        print("stopped")
        return 0
    finally:
        if server.poll() is None:
            server.terminate()
            try:
                server.wait(timeout=10)
            except subprocess.TimeoutExpired:
                server.kill()
        log.close()
        Path(log.name).unlink(missing_ok=True)


def _experiment_id(store: TrackingStore, name: str) -> str:
    """The MLflow experiment of sweep `name` (a sweep logs to the experiment of its name)."""
    from tuning.tracking.store import open_store

    experiment = open_store(store).get_experiment_by_name(name)
    if experiment is None:
        raise UsageError(f"no sweep {name!r} in the MLflow store {store.uri}; `mamba-tune list` shows the sweeps, "
                         "and --tracking-uri names the store a sweep logged to")
    return experiment.experiment_id


def _open(link: str, name: str | None) -> None:
    """Print the sweep's page and open it in a browser where this session has a display."""
    if name is None:
        return
    print(f"sweep {name}: {link}", flush=True)
    if os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY") or sys.platform == "darwin":
        webbrowser.open(link)  # never a text browser in this terminal: only with a display


def _exit(signum: int, frame: object) -> None:
    raise SystemExit(0)


def _in_use(host: str, port: int) -> bool:
    with socket.socket() as probe:
        return probe.connect_ex(("127.0.0.1" if host in ("0.0.0.0", "::") else host, port)) == 0


def _wait_healthy(url: str, server: subprocess.Popen) -> bool:
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline and server.poll() is None:
        try:
            with urllib.request.urlopen(f"{url}/health", timeout=2) as answer:
                if answer.status == 200:
                    return True
        except OSError:
            time.sleep(0.5)
    return False
