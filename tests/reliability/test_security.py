"""Security: checkpoints load as weights only, servers bind to this machine, no credentials in the repository."""

from __future__ import annotations

import ast
import re
import subprocess
import time
from pathlib import Path

import pytest

from tests.cli import ROOT, cli_command, cli_env
from tests.tuning.mlflow_server import free_port

KEY_LIKE = re.compile(
    r"AKIA[0-9A-Z]{16}"  # AWS access key id
    r"|aws_secret_access_key\s*[=:]\s*\S{20,}"  # an AWS secret assigned
    r"|-----BEGIN [A-Z ]*PRIVATE KEY-----"
    r"|gh[pousr]_[A-Za-z0-9]{36}"  # GitHub tokens
    r"|xox[baprs]-[A-Za-z0-9-]{10,}"  # Slack tokens
    r"|sk-[A-Za-z0-9]{32,}"  # API secret keys
)


def test_every_torch_load_is_weights_only():
    calls = []
    for path in [*ROOT.glob("model/*.py"), *ROOT.glob("tuning/*.py"), *ROOT.glob("bench/*.py")]:
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and ast.unparse(node.func) == "torch.load":
                keywords = {k.arg: ast.unparse(k.value) for k in node.keywords}
                calls.append((path.name, keywords.get("weights_only")))
    assert calls and all(value == "True" for _, value in calls), calls


def test_the_repository_holds_no_credentials():
    files = subprocess.run(["git", "ls-files"], capture_output=True, text=True, cwd=ROOT, check=True).stdout.split()
    this = Path(__file__).resolve().relative_to(ROOT).as_posix()
    leaks = []
    for name in files:
        path = ROOT / name
        if name == this or not path.is_file():
            continue
        text = path.read_bytes().decode("utf-8", "replace")
        leaks += [f"{name}: {match.group()[:12]}..." for match in KEY_LIKE.finditer(text)]
    assert not leaks, leaks
    assert KEY_LIKE.search("id AKIA" + "ABCDEFGHIJKLMNOP") and KEY_LIKE.search("-----BEGIN RSA PRIVATE KEY-----")


def _listening(port: int) -> set[str]:
    """The local addresses listening on `port` (IPv4, from /proc/net/tcp)."""
    found = set()
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        local, state = line.split()[1], line.split()[3]
        address, hex_port = local.split(":")
        if state == "0A" and int(hex_port, 16) == port:  # 0A: LISTEN
            found.add(".".join(str(int(address[i:i + 2], 16)) for i in (6, 4, 2, 0)))
    return found


@pytest.mark.integration
def test_the_mlflow_ui_listens_on_this_machine_only_by_default(tmp_path):
    from mlflow import MlflowClient

    store, port = f"sqlite:///{tmp_path / 'mlflow.db'}", free_port()
    MlflowClient(store).search_experiments()  # makes the store
    process = subprocess.Popen(cli_command("ui", "--tracking-uri", store,
                                             "--port", port), stdout=subprocess.PIPE, text=True, cwd=ROOT,
                               env=cli_env())
    try:
        deadline = time.monotonic() + 120
        while not _listening(port) and time.monotonic() < deadline and process.poll() is None:
            time.sleep(0.5)
        assert _listening(port) == {"127.0.0.1"}
    finally:
        process.terminate()
        process.wait(timeout=60)
