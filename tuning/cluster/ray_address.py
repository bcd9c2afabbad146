"""The Ray cluster a command joins: --address, else RAY_ADDRESS, else none (a local Ray); checked without Ray."""

from __future__ import annotations

import os
import socket

from tuning.errors import UsageError


def ray_address(address: str | None) -> tuple[str | None, str]:
    """-> (the address to join, or None for a local Ray; where it came from: "--address" or "RAY_ADDRESS").

    `ray job submit` sets RAY_ADDRESS for its entrypoint. An address nobody answers at, a Ray Client or
    dashboard URL, or no HOST:PORT is refused (UsageError) in seconds: ray.init retries for minutes."""
    source = "--address"
    if address is None and os.environ.get("RAY_ADDRESS"):
        address, source = os.environ["RAY_ADDRESS"], "RAY_ADDRESS"
    if address not in (None, "auto", "local"):
        _check_reachable(address, source)
    return address, source


def _check_reachable(address: str, source: str, timeout_s: float = 5.0) -> None:
    if address.startswith("ray://"):
        raise UsageError(f"{source} {address}: Ray Client addresses are not supported (the sweep's records are "
                         "written where its driver runs); use HOST:PORT of the head node, or `ray job submit`")
    if address.startswith(("http://", "https://")):
        raise UsageError(f"{source} {address}: a dashboard (Jobs API) address; join a cluster by its head's "
                         "HOST:PORT (port 6379 unless changed), or submit the sweep with `ray job submit --address "
                         f"{address} -- mamba-tune sweep ...`" + ("; unset RAY_ADDRESS for a local Ray"
                                                                  if source == "RAY_ADDRESS" else ""))
    host, _, port = address.rpartition(":")
    if not host or not port.isdigit():
        raise UsageError(f"{source} {address!r} is not HOST:PORT or auto, e.g. --address 10.0.0.5:6379")
    try:
        socket.create_connection((host, int(port)), timeout=timeout_s).close()
    except OSError as exc:
        raise UsageError(f"{source} {address}: no Ray cluster answers there ({exc.strerror or exc}); start one "
                         "with `ray start --head` or check the address") from None
