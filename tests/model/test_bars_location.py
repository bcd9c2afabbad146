"""Bars read from an object store (model/bars_location.py) against a real S3-compatible server: the same Dataset as
from the local file, and one line naming the object for each way a read fails. gs:// cannot be served here: a read
reaches pyarrow's GcsFileSystem and fails as it does without credentials."""

from __future__ import annotations

import pytest
import torch

from model.bars import DataError, read_bars
from model.bars_location import RemoteDataError, bars_location
from model.data import DataConfig, load_dataset
from tests.bars import write_bars
from tests.s3_server import BUCKET, require_signed_keys

CONFIG = DataConfig(window=16, horizon=4)


@pytest.fixture(scope="module")
def local_bars(tmp_path_factory):
    return write_bars(tmp_path_factory.mktemp("bars") / "bars.parquet", 1200, seed=5)


@pytest.fixture()
def s3(s3_server, monkeypatch):
    """The server, with this process's environment holding its endpoint and credentials."""
    for name, value in s3_server.env().items():
        monkeypatch.setenv(name, value)
    return s3_server


def test_a_dataset_from_s3_is_the_dataset_from_the_local_file(s3, local_bars):
    uri = s3.put(local_bars, "daily/bars.parquet")
    here, there = load_dataset(local_bars, CONFIG), load_dataset(uri, CONFIG)
    for name in ("features", "targets", "train_index", "val_index", "test_index", "test_har"):
        torch.testing.assert_close(torch.from_numpy(getattr(there, name).copy()),
                                   torch.from_numpy(getattr(here, name).copy()), rtol=0, atol=0,
                                   equal_nan=True)  # targets: NaN where a sample has none
    assert there.scaler.to_dict() == here.scaler.to_dict() and there.baselines == here.baselines
    assert there.summary == {**here.summary, "path": uri}  # the URI as given: the sweep records it so


def test_a_missing_object_names_its_bucket_and_key_and_where_credentials_come_from(s3):
    with pytest.raises(RemoteDataError, match=rf"^s3://{BUCKET}/gone\.parquet: no such object \(bucket "
                       rf"'{BUCKET}', key 'gone\.parquet'\).*AWS_ACCESS_KEY_ID"):
        read_bars(f"s3://{BUCKET}/gone.parquet")


def test_an_object_that_is_not_parquet_is_refused_as_a_local_file_is(s3):
    uri = s3.put(b"timestamp,open,high,low,close,volume\n1,1,1,1,1,1\n", "bars.csv")
    with pytest.raises(DataError, match=rf"^{uri}: not a Parquet file.*Parquet magic bytes.*mamba-tune data import"):
        read_bars(uri)


def test_credentials_the_store_denies_are_said_in_one_line_without_a_traceback_of_the_store(s3, local_bars,
                                                                                          monkeypatch):
    uri = s3.put(local_bars, "denied/bars.parquet")
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "never-issued")
    with require_signed_keys(), pytest.raises(RemoteDataError) as raised:
        read_bars(uri)
    message = str(raised.value)
    assert message.startswith(f"{uri}: cannot be read (") and "ACCESS_DENIED" in message, message
    assert "credentials come from the environment alone (AWS_ACCESS_KEY_ID" in message and "\n" not in message


def test_an_unknown_scheme_is_refused_before_any_filesystem_is_asked():
    with pytest.raises(RemoteDataError, match=r"^ftp://host/bars\.parquet: unknown scheme ftp://, bars are read "
                       r"from a path, s3://BUCKET/KEY or gs://BUCKET/KEY"):
        read_bars("ftp://host/bars.parquet")
    assert str(bars_location("runs/bars.parquet")) == "runs/bars.parquet"


def test_gs_reaches_gcs_and_says_its_credentials_are_wrong(tmp_path, monkeypatch):
    monkeypatch.setenv("GOOGLE_APPLICATION_CREDENTIALS", str(tmp_path / "no-key.json"))
    with pytest.raises(RemoteDataError) as raised:
        read_bars("gs://bucket/bars.parquet")
    message = str(raised.value)
    assert message.startswith(f"gs://bucket/bars.parquet: cannot be read (Cannot open credentials file {tmp_path}/no-key.json)"), message
    assert "GOOGLE_APPLICATION_CREDENTIALS" in message and "\n" not in message
