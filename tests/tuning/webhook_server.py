"""A real local webhook for the notification tests: an http.server in a thread that keeps what is POSTed to it."""

from __future__ import annotations

import contextlib
import json
import socket
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer
from typing import Any


class Webhook:
    """Listens on 127.0.0.1 (a free port) until stop(); `received` holds each POST's (path, JSON body)."""

    def __init__(self, status: int = 200) -> None:
        self.received: list[tuple[str, dict[str, Any]]] = []
        webhook = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - http.server's name
                body = self.rfile.read(int(self.headers["Content-Length"]))
                webhook.received.append((self.path, json.loads(body)))
                self.send_response(status)
                self.end_headers()
                self.wfile.write(b"ok")

            def log_message(self, *args: Any) -> None:  # quiet
                pass

        self.server = HTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    @property
    def url(self) -> str:
        """A Slack-like URL: its secret in the path."""
        return f"http://127.0.0.1:{self.server.server_port}/services/T000/B000/SECRETTOKEN"

    @property
    def host(self) -> str:
        return f"127.0.0.1:{self.server.server_port}"

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


class HangingWebhook:
    """A webhook that never answers, on 127.0.0.1 (a free port) until stop(): it accepts each connection and then,
    `silent`, says nothing, or, `trickle`, sends a never-ending status line a byte every 0.5 s (no socket timeout
    ever fires on it, as from a stuck proxy)."""

    def __init__(self, mode: str = "silent") -> None:
        self.mode = mode
        self.stopped = threading.Event()
        self.accepted = threading.Event()
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.listener.settimeout(0.2)
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.listener.getsockname()[1]}/services/T000/B000/SECRETTOKEN"

    def _serve(self) -> None:
        held = []
        while not self.stopped.is_set():
            with contextlib.suppress(TimeoutError):
                connection, _ = self.listener.accept()
                held.append(connection)
                self.accepted.set()
                if self.mode == "trickle":  # a status line, then a header line that never ends
                    connection.sendall(b"HTTP/1.1 200 OK\r\nX-Slow: ")
            if self.mode == "trickle":
                for connection in held:
                    with contextlib.suppress(OSError):
                        connection.send(b"x")
                self.stopped.wait(0.5)
        for connection in held:
            connection.close()

    def stop(self) -> None:
        self.stopped.set()
        self.thread.join(5)
        self.listener.close()
