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
from urllib.parse import quote

from tuning.cli.help import subcommand
from tuning.cli.listing import no_sweep_named
from tuning.cli.store_options import add_tracking_uri_option, storage_help
from tuning.errors import UsageError
from tuning.sweep.manifest import SweepManifest, read_manifest
from tuning.sweep_files import MANIFEST, is_uri, sweep_paths
from tuning.tracking.store import TrackingStore, resolve_store

START_TIMEOUT_S = 60


def add_command(commands: argparse._SubParsersAction) -> None:
    ui = subcommand(commands, "ui", "browse sweeps and trials in the MLflow UI",
                     ("mamba-tune ui", "mamba-tune ui smoke  # opens on the sweep's runs",
                      "mamba-tune ui smoke --storage runs/demo/sweeps  # that sweep's runs, in the store it logged to",
                      "mamba-tune ui --tracking-uri sqlite:///runs/mlflow/mlflow.db --port 5001"),
                     "Serve the MLflow UI over the embedded store on this machine (127.0.0.1 unless --host says "
                     "otherwise), and open it on a sweep's runs when NAME is given: with --storage, the runs of "
                     "the sweep of that name in that storage alone, in the MLflow store it logged to.")
    ui.add_argument("name", nargs="?", help="a sweep: print and open the UI on its runs")
    ui.add_argument("--storage", help=storage_help(
        "the --storage sweep NAME was started with: open its own runs (its sweep.json names its MLflow store and run "
        "tag) although another sweep of that name, in another storage, logged to the same experiment",
        default="default: every run of the experiment NAME"))
    add_tracking_uri_option(ui)  # an http(s) server: its own UI is used
    ui.add_argument("--host", default="127.0.0.1",
                    help="interface to serve on (default 127.0.0.1: this machine only; 0.0.0.0 exposes it)")
    ui.add_argument("--port", type=int, default=5000, help="port (default 5000)")
    ui.set_defaults(run=cmd_ui)


def cmd_ui(args: argparse.Namespace) -> int:
    manifest = _manifest(args.name, args.storage)
    store = resolve_store(args.tracking_uri or (manifest.tracking_uri if manifest is not None else None))
    database = Path(store.uri.removeprefix("sqlite:///"))
    if store.embedded and not database.is_file():
        raise UsageError(f"no MLflow store at {database}; run a sweep first (`make demo`), or pass --tracking-uri "
                         "sqlite:///PATH of the store to browse")
    page = "" if args.name is None else sweep_page(store, args.name, manifest)
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


def _manifest(name: str | None, storage: str | None) -> SweepManifest | None:
    """The manifest of sweep `name` in `storage` (--storage); None without --storage. UsageError for --storage
    without NAME, and for a sweep not there (naming the sweeps there are)."""
    if storage is None:
        return None
    if name is None:
        raise UsageError(f"--storage {storage} says where sweep NAME lives, and no NAME is given; add the sweep's "
                         "name (`mamba-tune list --storage DIR` shows them) or drop --storage")
    paths = sweep_paths(storage, name)
    if not is_uri(storage) and not (paths.folder / MANIFEST).is_file():  # a URI storage's records are fetched
        raise no_sweep_named(name, storage)
    return read_manifest(paths)


def sweep_page(store: TrackingStore, name: str, manifest: SweepManifest | None) -> str:
    """The UI's page of sweep `name`'s runs: without its manifest, every run of the experiment `name`; with it, only
    the runs its sweep_id tags (another sweep of that name may log to the same experiment)."""
    if manifest is None:
        return f"/#/experiments/{_experiment_id(store, name)}/runs"
    from tuning.tracking.ops import SWEEP_TAG
    from tuning.tracking.store import open_store

    client = open_store(store)
    experiment = client.get_experiment_by_name(name)
    tagged = f"tags.`{SWEEP_TAG}` = '{manifest.sweep_id}'"
    if experiment is None or not client.search_runs([experiment.experiment_id], tagged, max_results=1):
        raise UsageError(f"sweep {name!r} (sweep_id {manifest.sweep_id}) has no runs in the MLflow store {store.uri}; "
                         "pass --tracking-uri, the store it logged to, if the store was moved")
    return f"/#/experiments/{experiment.experiment_id}/runs?searchFilter={quote(tagged, safe='')}"


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
