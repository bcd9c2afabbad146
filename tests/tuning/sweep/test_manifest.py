"""sweep.json as a typed SweepManifest: the same JSON as before, and files of older versions still read."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tuning.sweep.manifest import SweepManifest

OLDER = {"name": "t", "data": "/data/bars.parquet", "space": {"name": "t"}, "trials": 5, "ray_storage": "/s/t",
         "tracking_uri": "sqlite:///m.db", "data_identity": {"n_bars": 1500}, "created": "2026-10-01T12:00:00+00:00"}


def test_manifest_round_trips_through_json(tmp_path):
    manifest = SweepManifest.new("t", tmp_path / "bars.parquet", {"name": "t"}, 5, "/s/t", "sqlite:///m.db",
                                 {"n_bars": 1500, "residual_to": "har", "leverage_lookbacks": [1]}, {"removed": [1024]})
    again = SweepManifest.from_dict(json.loads(json.dumps(manifest.to_dict())))
    assert again == manifest and Path(again.data).is_absolute() and len(again.sweep_id) == 32


def test_manifest_writes_the_keys_earlier_versions_wrote():
    manifest = SweepManifest.from_dict({**OLDER, "sweep_id": "abc"})
    assert list(manifest.to_dict()) == ["name", "sweep_id", "data", "space", "trials", "ray_storage", "tracking_uri",
                                        "data_identity", "created"]  # no memory_probe key when none ran
    assert SweepManifest.from_dict({**OLDER, "sweep_id": "abc", "memory_probe": {"removed": []}}).to_dict()[
        "memory_probe"] == {"removed": []}


def test_manifest_of_a_version_without_sweep_id_takes_its_creation_time():
    manifest = SweepManifest.from_dict(OLDER)
    assert manifest.sweep_id == OLDER["created"] and manifest.memory_probe is None


def test_manifest_of_a_version_before_tracking_logs_to_the_default_store():
    older = {k: v for k, v in OLDER.items() if k != "tracking_uri"}
    assert SweepManifest.from_dict(older).tracking_uri is None


def test_an_extended_manifest_keeps_its_stages_and_round_trips():
    manifest = SweepManifest.from_dict({**OLDER, "sweep_id": "abc"})
    assert manifest.trial_stages == (5,) and "stages" not in manifest.to_dict()
    twice = manifest.extended(8).extended(12)
    assert (twice.trials, twice.trial_stages) == (12, (5, 8, 12))
    assert twice.to_dict()["stages"] == [5, 8, 12] and SweepManifest.from_dict(twice.to_dict()) == twice


def test_a_sweep_from_before_the_volatility_and_har_inputs_resumes_on_the_bar_features_alone():
    older = {**OLDER, "space": {"name": "t", "run": {"data": {"window": 16}, "model": {"d_model": 16}}}}
    space = SweepManifest.from_dict(older).space
    assert space["run"] == {"data": {"vol_lookbacks": [], "residual_to": "none", "leverage_lookbacks": [],
                                     "window": 16}, "model": {"d_model": 16}}
    assert SweepManifest.from_dict(OLDER).space["run"]["data"] == {"vol_lookbacks": [], "residual_to": "none",
                                                                   "leverage_lookbacks": []}
    newer = {**older, "data_identity": {"n_bars": 1500, "residual_to": "har", "leverage_lookbacks": [1, 4]}}
    assert SweepManifest.from_dict(newer).space == older["space"]  # today's sweeps: their space as written


def test_a_sweep_from_before_the_fall_inputs_resumes_without_them_and_keeps_its_other_inputs():
    space = {"name": "t", "run": {"data": {"window": 16, "vol_lookbacks": [1, 4]}}}
    before = {**OLDER, "space": space, "data_identity": {"n_bars": 1500, "residual_to": "har"}}
    assert SweepManifest.from_dict(before).space["run"]["data"] == {"leverage_lookbacks": [], "window": 16,
                                                                    "vol_lookbacks": [1, 4]}
    chosen = {**before, "space": {"name": "t", "run": {"data": {"leverage_lookbacks": [2]}}}}
    assert SweepManifest.from_dict(chosen).space == chosen["space"]  # a space that set them keeps its own


def test_a_study_in_a_database_of_its_own_is_kept_and_the_default_one_writes_no_key():
    manifest = SweepManifest.new("t", Path("/data/bars.parquet"), {"name": "t"}, 5, "s3://b/s", None,
                                 {"residual_to": "har", "leverage_lookbacks": []}, None, study_url="postgresql://db:5432/optuna")
    assert manifest.to_dict()["study_url"] == "postgresql://db:5432/optuna"
    assert SweepManifest.from_dict(manifest.to_dict()) == manifest
    assert "study_url" not in SweepManifest.from_dict(OLDER).to_dict() and SweepManifest.from_dict(OLDER).study_url is None


WEBHOOK = "https://hooks.slack.com/services/T000/B000/" + "S3CR3TT0K3N"  # a secret


def test_manifest_new_keeps_that_a_webhook_was_set_and_never_its_url():
    space = {"name": "t", "notify": {"webhook": WEBHOOK}}
    identity = {"n_bars": 1500, "residual_to": "har", "leverage_lookbacks": [1]}
    manifest = SweepManifest.new("t", "/data/bars.parquet", space, 5, "/s/t", "sqlite:///m.db", identity, None,
                                 webhook_set=True)
    written = json.dumps(manifest.to_dict())
    assert "S3CR3TT0K3N" not in written and manifest.space == {"name": "t"}
    assert manifest.to_dict()["webhook_set"] is True and SweepManifest.from_dict(json.loads(written)) == manifest
    assert "webhook_set" not in SweepManifest.from_dict({**OLDER, "sweep_id": "abc"}).to_dict()


def test_manifest_of_an_older_version_that_kept_the_webhook_url_reads_it_once_and_never_writes_it():
    manifest = SweepManifest.from_dict({**OLDER, "space": {"name": "t", "notify": {"webhook": WEBHOOK}}})
    assert manifest.legacy_webhook == WEBHOOK and manifest.webhook_set and "notify" not in manifest.space
    assert "S3CR3TT0K3N" not in json.dumps(manifest.to_dict()) + repr(manifest)
    assert "S3CR3TT0K3N" not in json.dumps(manifest.extended(8).to_dict())


@pytest.mark.parametrize("notify", [None, {}, {"webhook": None}, {"webhook": ""}, {"webhook": 5}, "none"],
                         ids=["null", "empty", "webhook null", "webhook empty", "webhook no string", "no mapping"])
def test_manifest_of_an_older_version_with_a_notify_section_but_no_url_set_no_webhook(notify):
    manifest = SweepManifest.from_dict({**OLDER, "space": {"name": "t", "notify": notify}})
    assert not manifest.webhook_set and manifest.legacy_webhook is None and "notify" not in manifest.space
    assert "webhook_set" not in manifest.to_dict()


def test_manifest_that_says_a_webhook_was_set_keeps_it_whatever_its_notify_section():
    manifest = SweepManifest.from_dict({**OLDER, "space": {"name": "t", "notify": None}, "webhook_set": True})
    assert manifest.webhook_set and manifest.legacy_webhook is None
