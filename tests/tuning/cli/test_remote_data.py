"""`--data s3://...` and `gs://...` of sweep, train and promote, refused in one line with exit 2 and nothing
written: an unknown scheme, credentials in the URI, a missing object, credentials the store denies, an object
that is not Parquet, gs:// without its credentials. The S3 store is a real S3-compatible server (tests/s3_server.py)."""

from __future__ import annotations

import pytest

from tests.bars import write_bars
from tests.cli import assert_one_line_error, cli_env, run_cli
from tests.s3_server import BUCKET, require_signed_keys
from tests.tuning.sweeps import write_space
from tuning.cli.main import main

SECRET = "c2VjcmV0" + "dmFsdWU"  # split: nothing key-like in the source


@pytest.fixture()
def s3(s3_server, monkeypatch):
    for name, value in s3_server.env().items():
        monkeypatch.setenv(name, value)
    return s3_server


def commands(tmp_path, data: str) -> dict[str, list[str]]:
    """Each command that reads --data, with what else it needs, writing only under tmp_path."""
    return {"sweep": ["sweep", "--data", data, "--space", str(write_space(tmp_path)), "--storage",
                      str(tmp_path / "sweeps")],
            "train": ["train", "--data", data, "--out", str(tmp_path / "train")],
            "promote": ["promote", "mamba-forecaster", "--data", data]}


def refused(capsys, argv: list[str], starts: str) -> str:
    """Run `mamba-tune ARGV` here; assert exit 2 and one line `error: STARTS...`; -> the line."""
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: {starts}") and err.count("\n") == 1 and "Traceback" not in err, err
    return err


def nothing_written(tmp_path) -> bool:
    return not (tmp_path / "sweeps").exists() and not (tmp_path / "train").exists()


@pytest.mark.parametrize("command", ["sweep", "train", "promote"])
def test_an_unknown_scheme_and_credentials_in_the_uri_are_refused(command, tmp_path, capsys):
    refused(capsys, commands(tmp_path, "ftp://host/bars.parquet")[command],
            "--data ftp://host/bars.parquet: unknown scheme ftp://, bars are read from a path, s3://BUCKET/KEY or "
            "gs://BUCKET/KEY")
    line = refused(capsys, commands(tmp_path, f"s3://{BUCKET}/bars.parquet?secret_key={SECRET}")[command],
                   f"--data s3://{BUCKET}/bars.parquet holds credentials (secret_key)")
    assert SECRET not in line and "AWS_ACCESS_KEY_ID" in line
    assert nothing_written(tmp_path)


@pytest.mark.parametrize("command", ["sweep", "train", "promote"])
def test_a_missing_object_says_which_bucket_and_key(command, s3, tmp_path, capsys):
    line = refused(capsys, commands(tmp_path, f"s3://{BUCKET}/none/bars.parquet")[command],
                   f"s3://{BUCKET}/none/bars.parquet: no such object (bucket '{BUCKET}', key 'none/bars.parquet')")
    assert "credentials, which come from the environment (AWS_ACCESS_KEY_ID" in line
    assert nothing_written(tmp_path)


def test_a_sweep_on_an_object_that_is_not_parquet_is_refused_before_anything_is_written(s3, tmp_path, capsys):
    uri = s3.put(b"Date,Open,High,Low,Close,Volume\n", "exports/bars.csv")
    refused(capsys, commands(tmp_path, uri)["sweep"], f"{uri}: not a Parquet file, or a truncated one")
    assert nothing_written(tmp_path)


def test_a_sweep_with_credentials_the_store_denies_is_refused_by_a_process_as_a_user_runs_it(s3_server,
                                                                                             tmp_path):
    uri = s3_server.put(write_bars(tmp_path / "bars.parquet", 600, seed=1), "denied/bars.parquet")
    with require_signed_keys():
        done = run_cli(*commands(tmp_path, uri)["sweep"], timeout=120,
                       env=cli_env(**s3_server.env(key_id="never-issued")))
    assert_one_line_error(done, f"{uri}: cannot be read (When getting information for key 'denied/bars.parquet' "
                          f"in bucket '{BUCKET}': AWS Error ACCESS_DENIED")
    assert "credentials come from the environment alone (AWS_ACCESS_KEY_ID" in done.stderr
    assert nothing_written(tmp_path)


def test_a_sweep_on_gs_without_its_credentials_reaches_gcs_and_says_so(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("GOOGLE_APPLICATION_CREDENTIALS", str(tmp_path / "key.json"))
    refused(capsys, commands(tmp_path, "gs://bucket/bars.parquet")["sweep"],
            f"gs://bucket/bars.parquet: cannot be read (Cannot open credentials file {tmp_path / 'key.json'}), the "
            "data must be an object these credentials may read; credentials come from the environment alone "
            "(GOOGLE_APPLICATION_CREDENTIALS)")
    assert nothing_written(tmp_path)
