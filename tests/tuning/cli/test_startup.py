"""The command line answers --version and refuses bad input before it imports torch, Ray or MLflow: in about a
second, where importing them takes several."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.cli import ROOT, cli_env

HEAVY = ("torch", "ray", "mlflow", "optuna")


@pytest.mark.parametrize("args", [
    ["--version"],
    ["best", "nope", "--storage", "{tmp}"],
    ["resume", "nope", "--storage", "{tmp}"],
    ["doctor", "--address", "nowhere"],
    ["sweep", "--data", "{tmp}/missing.parquet", "--space", "search_spaces/smoke.yaml", "--storage", "{tmp}"],
], ids=["version", "best of no sweep", "resume of no sweep", "doctor bad address", "sweep without bars"])
def test_version_and_bad_input_import_none_of_torch_ray_or_mlflow(args, tmp_path):
    args = [arg.format(tmp=tmp_path) for arg in args]
    program = (f"import sys\nfrom tuning.cli.main import main\ntry:\n    code = main({args!r})\nexcept SystemExit as e:\n"
               f"    code = e.code\nprint(code, sorted(m for m in {HEAVY!r} if m in sys.modules))")
    done = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, cwd=ROOT, env=cli_env(),
                          timeout=120)
    assert done.stdout.splitlines()[-1] == f"{0 if args == ['--version'] else 2} []", (done.stdout, done.stderr)
