"""A real `mlflow server` process on a free localhost port, for the tests that need a tracking server."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

from tests.cli import free_port
from tests.processes import wait_until_healthy


class MlflowServer:
    """`mlflow server` over an SQLite store (or `backend_store`, a database URL) and an artifact folder in `folder`;
    stop() and start() keep both. `env`: added to the server's environment (a database's credentials)."""

    def __init__(self, folder: Path, backend_store: str | None = None, env: dict[str, str] | None = None) -> None:
        self.folder, self.port = folder, free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.backend_store = backend_store or f"sqlite:///{folder / 'server.db'}"
        self.env = {**os.environ, **(env or {})}
        self.process: subprocess.Popen | None = None

    def start(self, timeout_s: float = 90) -> None:
        command = [sys.executable, "-m", "mlflow", "server", "--backend-store-uri",
                   self.backend_store, "--artifacts-destination", str(self.folder / "artifacts"),
                   "--host", "127.0.0.1", "--port", str(self.port), "--workers", "1"]
        with open(self.folder / "server.log", "a") as log:  # the process keeps its own copy of the handle
            self.process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
                                            env=self.env)
        wait_until_healthy(self.process, f"{self.url}/health", timeout_s,
                           lambda: (self.folder / "server.log").read_text()[-2000:])

    def stop(self) -> None:
        """Kill the server and its workers at once, as a crash would (its store on disk stays)."""
        if self.process is not None:
            try:
                os.killpg(self.process.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            self.process.wait()
        self.process = None
