"""`mamba-tune ui`: the MLflow UI over the embedded store (runs/mlflow), on 127.0.0.1 unless told otherwise."""

from __future__ import annotations

import argparse
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

from tuning.errors import UsageError
from tuning.tracking.store import DEFAULT_TRACKING_DIR, resolve_store

START_TIMEOUT_S = 60


def add_command(commands: argparse._SubParsersAction) -> None:
    ui = commands.add_parser("ui", help="browse sweeps and trials in the MLflow UI")
    ui.add_argument("--tracking-uri", help=f"sqlite:///PATH of a store (default: MLFLOW_TRACKING_URI, else "
                    f"{DEFAULT_TRACKING_DIR}/mlflow.db); for an http(s) server, its own UI is used")
    ui.add_argument("--host", default="127.0.0.1",
                    help="interface to serve on (default 127.0.0.1: this machine only; 0.0.0.0 exposes it)")
    ui.add_argument("--port", type=int, default=5000, help="port (default 5000)")
    ui.set_defaults(run=cmd_ui)


def cmd_ui(args: argparse.Namespace) -> int:
    store = resolve_store(args.tracking_uri)
    if not store.embedded:
        print(f"{store.uri} is an MLflow server: its UI is at {store.uri}")
        return 0
    database = Path(store.uri.removeprefix("sqlite:///"))
    if not database.is_file():
        raise UsageError(f"no MLflow store at {database}; run a sweep first (`make demo`), or pass --tracking-uri "
                         "sqlite:///PATH of the store to browse")
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
