"""MAMBA_TUNE_STORAGE: every --storage's default where set (a KubeRay cluster's bucket, from its settings), read
when the command line is parsed, shown in --help, and refused when it holds credentials, as --storage is."""

from __future__ import annotations

import pytest

from tests.cli import assert_one_line_error, cli_env, run_cli
from tuning.cli.main import build_parser
from tuning.errors import UsageError
from tuning.sweep_files import LOCAL_STORAGE, STORAGE_ENV, default_storage, storage_flag

BUCKET = "s3://bucket/sweeps"  # no hyphen: --help may wrap its line there
# Every command with a --storage, and its arguments other than that
COMMANDS = [["sweep", "--data", "b.parquet", "--space", "smoke"], ["resume", "s"], ["best", "s"], ["list"],
            ["doctor"]]


@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: c[0])
def test_every_storage_defaults_to_the_environments(command, monkeypatch):
    assert build_parser().parse_args(command).storage == LOCAL_STORAGE  # none set (tests/conftest.py)
    monkeypatch.setenv(STORAGE_ENV, BUCKET)  # after tuning.sweep_files was imported: read at parse time
    assert build_parser().parse_args(command).storage == BUCKET
    assert build_parser().parse_args([*command, "--storage", "elsewhere"]).storage == "elsewhere"


def test_an_empty_setting_is_no_setting(monkeypatch):
    monkeypatch.setenv(STORAGE_ENV, " ")
    assert default_storage() == LOCAL_STORAGE


def test_help_shows_the_default_and_where_it_comes_from(tmp_path):
    here = run_cli("sweep", "--help", cwd=tmp_path)
    assert here.returncode == 0 and " ".join(here.stdout.split()).count(f"default {LOCAL_STORAGE}, or {STORAGE_ENV}")
    for command in ("sweep", "resume", "best", "list", "doctor", "train"):  # train: where --look's sweep lives
        there = run_cli(command, "--help", cwd=tmp_path, env=cli_env(**{STORAGE_ENV: BUCKET}))
        assert f"default {BUCKET}, from {STORAGE_ENV}" in " ".join(there.stdout.split()), command


def test_a_command_uses_the_environments_storage(tmp_path):
    shelf = tmp_path / "shelf"
    shelf.mkdir()
    done = run_cli("list", cwd=tmp_path, env=cli_env(**{STORAGE_ENV: str(shelf)}))
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(f"no sweeps in {shelf}")


@pytest.mark.parametrize("command", [["list"], ["sweep", "--help"]])
def test_credentials_in_the_environment_are_refused_unshown(command, tmp_path):
    secret = "s3://sweeps-bucket/sweeps?secret_key=wJalrXUtnFEMIK7MDENG"
    done = run_cli(*command, cwd=tmp_path, env=cli_env(**{STORAGE_ENV: secret}))
    assert_one_line_error(done, f"{STORAGE_ENV} s3://sweeps-bucket/sweeps holds credentials (secret_key)")
    assert "wJalrXUtnFEMIK7MDENG" not in done.stderr + done.stdout


def test_a_resume_command_names_the_storage_unless_it_is_the_default_everywhere(monkeypatch):
    assert storage_flag(LOCAL_STORAGE) == ""
    assert storage_flag(BUCKET) == f" --storage {BUCKET}"
    monkeypatch.setenv(STORAGE_ENV, BUCKET)  # printed here, the command may be run where the setting differs
    assert storage_flag(BUCKET) == f" --storage {BUCKET}"
    assert storage_flag(LOCAL_STORAGE) == f" --storage {LOCAL_STORAGE}"
    monkeypatch.setenv(STORAGE_ENV, "s3://user:pw@sweeps-bucket/sweeps")
    with pytest.raises(UsageError, match=STORAGE_ENV):
        default_storage()
