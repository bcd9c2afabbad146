"""A real local webhook for the notification tests: an http.server in a thread that keeps what is POSTed to it."""

from __future__ import annotations

import json
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
