"""The Ray a sweep's driver runs (tuning/sweep/ray_version.py): the range mamba-tune admits is pyproject's; a Ray
older than it, or one that differs from its cluster's, is refused in one line naming both versions and the fix,
before Ray starts. Nothing here starts Ray."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest
import ray
import ray._private.utils
import tomllib  # 3.11+; ruff (target 3.10) files it with the third-party modules
from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet

from tests.cli import ROOT, assert_one_line_error, cli_env
from tests.tuning.sweeps import write_space
from tuning.cluster import ray_address
from tuning.errors import UsageError
from tuning.sweep import session
from tuning.sweep.manifest import SweepManifest
from tuning.sweep.ray_version import ADMITTED_RAY, EXTRAS, OLDEST_RAY, check_ray_version, version_mismatch
from tuning.sweep_files import MANIFEST

FLOOR = "2.56"  # tuning/sweep/ray_version.py: why this floor
PIP_FIX = f"pip install 'ray[default,train,tune]{ADMITTED_RAY}'"
THIS_PYTHON = "{}.{}.{}".format(*sys.version_info[:3])  # as Ray names a process's Python


def ray_requirement() -> Requirement:
    """pyproject.toml's requirement on Ray: what pip installs mamba-tune with."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    (ray_requirement,) = [req for req in map(Requirement, project["dependencies"]) if req.name == "ray"]
    return ray_requirement


def test_the_range_admitted_is_pyprojects_requirement_on_ray_and_its_floor_the_oldest_ray():
    required = ray_requirement()
    assert SpecifierSet(ADMITTED_RAY) == required.specifier
    (floor,) = [spec.version for spec in required.specifier if spec.operator == ">="]
    assert OLDEST_RAY == floor
    assert set(EXTRAS.split(",")) == required.extras  # the fix's pip install names them


def test_the_floor_is_the_oldest_minor_of_the_last_six_months_that_has_what_the_public_path_needs():
    assert OLDEST_RAY == FLOOR


def test_a_ray_older_than_the_floor_is_refused_in_one_line_naming_both_versions_and_the_fix():
    with pytest.raises(UsageError) as refused:
        check_ray_version(installed="2.55.1")
    message = str(refused.value)
    assert "\n" not in message
    assert message.startswith(f"Ray 2.55.1 is installed, older than Ray {FLOOR}, the oldest mamba-tune runs on")
    assert message.endswith(PIP_FIX)


@pytest.mark.parametrize("installed", [FLOOR, f"{FLOOR}.0", f"{FLOOR}.1", "2.60.1", None])
def test_the_floor_and_newer_are_accepted(installed):
    check_ray_version(installed=installed)  # None: the Ray installed here


def refusal_by_ray(cluster_ray: str) -> RuntimeError:
    """Ray's own refusal of this driver by a cluster started with `cluster_ray` on this Python: its real text."""
    cluster = {"ray_version": cluster_ray, "python_version": THIS_PYTHON}
    with pytest.raises(RuntimeError) as refused:
        ray._private.utils.check_version_info(cluster, "10.0.0.5:6379")
    return refused.value


def test_a_cluster_whose_ray_differs_is_named_in_one_line_with_both_versions_and_the_fix():
    mismatch = version_mismatch(refusal_by_ray("2.56.1"), "--address 10.0.0.5:6379")
    assert isinstance(mismatch, UsageError)
    message = str(mismatch)
    assert "\n" not in message
    assert message.startswith(f"--address 10.0.0.5:6379: the cluster runs Ray 2.56.1 on Python {THIS_PYTHON}, "
                              f"this driver Ray {ray.__version__} on Python {THIS_PYTHON}")
    assert f"pip install 'ray[default,train,tune]==2.56.1' on Python {THIS_PYTHON}" in message
    assert "ray job submit -- mamba-tune sweep" in message  # or run the sweep on the cluster


@pytest.mark.parametrize("error", [RuntimeError("Failed to connect to GCS at 10.0.0.5:6379"),
                                   RuntimeError("Version mismatch: the cluster is being upgraded"),
                                   ValueError("Invalid python_version_match_level: 'major'")])
def test_any_other_error_of_ray_is_not_taken_for_a_mismatch(error):
    assert version_mismatch(error, "--address 10.0.0.5:6379") is None


@pytest.fixture()
def ray_not_started(monkeypatch):
    """start_ray as on a driver where Ray is not initialized; ray.init refused as a cluster of Ray 2.56.1 refuses
    this driver (or fails the test, when called where it must not be)."""
    refusal = refusal_by_ray("2.56.1")
    monkeypatch.setattr(ray, "is_initialized", lambda: False)
    monkeypatch.setattr(ray_address, "_check_reachable", lambda address, source: None)
    monkeypatch.delenv("RAY_ADDRESS", raising=False)

    def init(**kwargs):
        raise refusal

    monkeypatch.setattr(ray, "init", init)


def test_a_sweep_joining_a_cluster_of_another_ray_is_refused_in_one_line(ray_not_started):
    with pytest.raises(UsageError, match=r"^--address 10\.0\.0\.5:6379: the cluster runs Ray 2\.56\.1 on Python "):
        session.start_ray("10.0.0.5:6379", trial_path_setting="public")


def on_an_older_ray(*words: object) -> subprocess.CompletedProcess:
    """`mamba-tune WORDS` on Ray 2.55.0, faked where it enters: `import ray` in the process that runs the command.
    Its stdout: the modules of Ray Train it had imported by the end."""
    older_ray = textwrap.dedent(f"""
        import sys
        import ray
        ray.__version__ = "2.55.0"
        from tuning.cli.main import main
        code = main({[str(word) for word in words]!r})
        print(sorted(name for name in sys.modules if name.startswith("ray.train")))
        raise SystemExit(code)
    """)
    return subprocess.run([sys.executable, "-c", older_ray], capture_output=True, text=True, cwd=ROOT, env=cli_env(),
                          timeout=300)


def assert_refused_before_ray_train(done: subprocess.CompletedProcess) -> None:
    assert_one_line_error(done, f"Ray 2.55.0 is installed, older than Ray {FLOOR}, the oldest mamba-tune runs on")
    assert done.stderr.rstrip().endswith(PIP_FIX)
    assert done.stdout.strip().splitlines()[-1] == "[]"  # an older Ray may not even import it


def test_mamba_tune_sweep_on_a_ray_older_than_the_floor_exits_2_in_one_line_before_anything_is_written(bars,
                                                                                                   tmp_path):
    storage = tmp_path / "sweeps"
    assert_refused_before_ray_train(on_an_older_ray(
        "sweep", "--data", bars, "--space", write_space(tmp_path), "--storage", storage,
        "--tracking-uri", f"sqlite:///{tmp_path / 'mlflow.db'}"))
    assert not storage.exists()


def test_mamba_tune_resume_on_a_ray_older_than_the_floor_exits_2_in_one_line_before_anything_is_written(tmp_path):
    folder = tmp_path / "sweeps" / "t"
    folder.mkdir(parents=True)
    manifest = SweepManifest.from_dict({"name": "t", "sweep_id": "abc", "data": str(tmp_path / "bars.parquet"),
                                        "space": {"name": "t"}, "trials": 5, "ray_storage": str(folder),
                                        "tracking_uri": f"sqlite:///{tmp_path / 'mlflow.db'}",
                                        "data_identity": {"n_bars": 1500}, "created": "2026-10-01T12:00:00+00:00"})
    (folder / MANIFEST).write_text(json.dumps(manifest.to_dict()))
    assert_refused_before_ray_train(on_an_older_ray("resume", "t", "--storage", tmp_path / "sweeps"))
    assert [path.name for path in tmp_path.rglob("*")] == ["sweeps", "t", MANIFEST]
