"""Input that would leak a secret, escape the storage or break another sweep: one line, exit 2, nothing written.

Credentials in a URI would be kept in sweep.json, MLflow's parameters and the printed lines; a sweep name
with '/' or '..' would name a folder outside the storage; a storage that already holds a sweep of that name
(started from another folder or head) would have its Tune experiment overwritten.
"""

from __future__ import annotations

import pytest

from tests.cli import ROOT, assert_one_line_error, run_cli
from tests.tuning.sweeps import write_space

SECRET = "wJalrXUtnFEMIK7MDENGbPxRfiCYEXAMPLEKEY"
KEY_ID = "AKIA" + "IOSFODNN7EXAMPLE"  # AWS's documented example, split: the repository holds nothing key-like
CREDENTIALS = {
    "storage user:password@": (["--storage", f"s3://{KEY_ID}:{SECRET}@my-bucket/sweeps"],
                               "--storage s3://my-bucket/sweeps holds credentials (user:password@)"),
    "storage secret query": (["--storage", f"s3://my-bucket/sweeps?region=us-east-1&secret_key={SECRET}"],
                             "--storage s3://my-bucket/sweeps holds credentials (secret_key)"),
    "tracking user:password@": (["--tracking-uri", f"https://alice:{SECRET}@mlflow.example.com:5000"],
                                "tracking URI (--tracking-uri or MLFLOW_TRACKING_URI) https://mlflow.example.com:5000 "
                                "holds credentials (user:password@)"),
    "storage Azure SAS": (["--storage", f"https://acct.blob.core.windows.net/sweeps?sp=rwdl&sig={SECRET}"],
                          "--storage https://acct.blob.core.windows.net/sweeps holds credentials (sig)"),
    "tracking client_secret": (["--tracking-uri", f"https://mlflow.example.com:5000/?client_id={KEY_ID}&"
                                f"client_secret={SECRET}"], "tracking URI (--tracking-uri or MLFLOW_TRACKING_URI) "
                               "https://mlflow.example.com:5000/ holds credentials (client_secret)"),
    "study password with '/'": (["--study-url", f"postgresql://bob:pa/{SECRET}@db.example.com/optuna"],
                                "--study-url postgresql://db.example.com/optuna holds credentials (user:password@)"),
    "storage S3 SigV2 signed": (["--storage", f"https://my-bucket.s3.amazonaws.com/sweeps?AWSAccessKeyId={KEY_ID}"
                                 f"&Expires=1700000000&Signature={SECRET}"],
                                "--storage https://my-bucket.s3.amazonaws.com/sweeps holds credentials "
                                "(AWSAccessKeyId, Signature)"),
    "tracking GCS V2 signed": (["--tracking-uri", f"https://storage.googleapis.com/b/mlflow?GoogleAccessId={KEY_ID}"
                                f"&Expires=1700000000&Signature={SECRET}"],
                               "tracking URI (--tracking-uri or MLFLOW_TRACKING_URI) "
                               "https://storage.googleapis.com/b/mlflow holds credentials (GoogleAccessId, Signature)"),
}


@pytest.mark.parametrize("case", CREDENTIALS)
def test_a_uri_with_credentials_is_refused_without_showing_them(case, bars, tmp_path):
    flags, message = CREDENTIALS[case]
    done = run_cli("sweep", "--data", bars, "--space", write_space(tmp_path), "--name", "unsafe-uri", *flags,
                   timeout=120)
    assert_one_line_error(done, message)
    assert "environment" in done.stderr or "MLFLOW_TRACKING_PASSWORD" in done.stderr  # where they belong
    assert SECRET not in done.stdout + done.stderr and KEY_ID not in done.stdout + done.stderr
    assert not (ROOT / "runs" / "sweeps" / "unsafe-uri").exists()


@pytest.mark.parametrize("command", ["resume", "best"])
@pytest.mark.parametrize("name", ["../escape", "a/b", "."])
def test_resume_and_best_refuse_a_name_that_is_not_a_sweep_name(command, name, tmp_path):
    (tmp_path / "escape").mkdir()
    (tmp_path / "escape" / "sweep.json").write_text("{}")  # what '../escape' would have read
    done = run_cli(command, name, "--storage", tmp_path / "sweeps", timeout=120)
    assert_one_line_error(done, f"sweep name {name!r}: use letters, digits, '-' or '_'")


@pytest.mark.parametrize("as_uri", [False, True], ids=["folder", "file URI"])
def test_a_storage_that_already_holds_the_sweep_is_refused_whatever_the_local_folder_says(as_uri, bars, tmp_path):
    """Another head (or working folder) started sweep 't' in this storage: its Tune experiment is there, and no
    sweep.json is here."""
    storage = tmp_path / "shared"
    experiment = storage / "t" / "tune"
    experiment.mkdir(parents=True)
    (experiment / "experiment_state.json").write_text("{}")
    flag = storage.as_uri() if as_uri else str(storage)
    done = run_cli("sweep", "--data", bars, "--space", write_space(tmp_path), "--storage", flag, timeout=120)
    assert_one_line_error(done, f"--storage {flag if as_uri else storage} already holds a sweep named 't' "
                                f"({flag + '/t' if as_uri else f'{storage}/t/tune'}), started from another folder "
                                "or machine")
    assert sorted(p.name for p in experiment.iterdir()) == ["experiment_state.json"]  # untouched
    assert sorted(p.name for p in (storage / "t").iterdir()) == ["tune"]  # no sweep.json written beside it


def test_a_uri_storage_holding_a_sweeps_records_alone_is_refused(bars, tmp_path):
    """A sweep on another head stopped before Ray Tune saved anything: its records' copy is all it left."""
    copy = tmp_path / "bucket" / "t"
    copy.mkdir(parents=True)
    (copy / "sweep.json").write_text('{"name": "t"}')
    flag = (tmp_path / "bucket").as_uri()
    done = run_cli("sweep", "--data", bars, "--space", write_space(tmp_path), "--storage", flag, timeout=120)
    assert_one_line_error(done, f"--storage {flag} already holds a sweep named 't' ({flag}/t)")
    assert (copy / "sweep.json").read_text() == '{"name": "t"}' and [p.name for p in copy.iterdir()] == ["sweep.json"]
