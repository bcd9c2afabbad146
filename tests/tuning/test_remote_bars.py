"""A sweep on bars in an object store (s3://, against a real S3-compatible server): the driver records the URI,
without a secret, and the SHA-256 of the object's bytes; `resume` reads the object again and refuses a changed one;
`best` and `train --refit` compare the object's hash as a file's."""

from __future__ import annotations

import hashlib
import json

import pytest

from model.data import load_dataset
from tests.bars import write_bars
from tests.s3_server import SECRET
from tests.tuning.sweeps import space_values
from tuning.bars_file import require_same_bars, sha256_of
from tuning.errors import UsageError
from tuning.search.space import parse_space
from tuning.sweep_files import MANIFEST, sweep_paths


@pytest.fixture()
def s3(s3_server, monkeypatch):
    for name, value in s3_server.env().items():
        monkeypatch.setenv(name, value)
    return s3_server


@pytest.fixture(scope="module")
def two_files(tmp_path_factory):
    folder = tmp_path_factory.mktemp("bars")
    return write_bars(folder / "a.parquet", 1200, seed=1), write_bars(folder / "b.parquet", 1200, seed=2)


def test_the_manifest_keeps_the_uri_and_the_objects_hash_and_resume_refuses_a_changed_object(s3, two_files,
                                                                                             tmp_path):
    from tuning.sweep import session

    first, other = two_files
    uri = s3.put(first, "sweeps-data/bars.parquet")
    values = space_values()
    space = parse_space(values, "space")
    paths = sweep_paths(str(tmp_path / "sweeps"), "t")
    paths.folder.mkdir(parents=True)
    data = load_dataset(uri, space.run.data)
    manifest = session.write_manifest(paths, uri, values, 5, data, "sqlite:///m.db")
    written = (paths.folder / MANIFEST).read_text()
    assert json.loads(written)["data"] == uri and manifest.data == uri
    assert manifest.bars_sha256 == hashlib.sha256(first.read_bytes()).hexdigest() == sha256_of(uri)
    assert SECRET not in written

    _, _, again = session.load_for_resume(paths, manifest)  # the object read again, the same bars
    assert again.summary == data.summary
    s3.put(other, "sweeps-data/bars.parquet")
    with pytest.raises(UsageError, match=rf"^{uri} has changed since sweep 't' started"):
        session.load_for_resume(paths, manifest)


def test_the_bars_a_winner_was_tuned_on_are_compared_by_the_objects_hash(s3, two_files):
    first, other = two_files
    uri = s3.put(first, "tuned/bars.parquet")
    require_same_bars(uri, sha256_of(first), "sweep 't'", "restore it")  # the same bytes: passes
    with pytest.raises(UsageError, match=rf"^{uri} has SHA-256 [0-9a-f]{{16}}, and sweep 't' was tuned on bars"):
        require_same_bars(uri, sha256_of(other), "sweep 't'", "restore it")
    with pytest.raises(ValueError, match=r"^s3://bars-bucket/tuned/gone\.parquet: no such object"):
        require_same_bars("s3://bars-bucket/tuned/gone.parquet", sha256_of(first), "sweep 't'", "restore it")
