"""A sweep's folder and the names of its files, without importing Ray, torch or MLflow (the CLI refuses bad input
before it imports them)."""

import json
import os
import shlex
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from model.atomic import write_text_atomic
from tuning.errors import UsageError
from tuning.uri_secrets import STORAGE_CREDENTIALS, refuse_credentials

LOCAL_STORAGE = "runs/sweeps"  # sweeps live in <storage>/<name>/: the default, and a URI storage's local records
STORAGE_ENV = "MAMBA_TUNE_STORAGE"  # every --storage's default where set: a cluster's bucket (deploy/kuberay settings)
MANIFEST = "sweep.json"  # what was asked: data, space, trials
LEDGER = "trials.json"  # every finished trial and why it ended
STUDY = "optuna.db"  # the Optuna study
TUNE_DIR = "tune"  # Ray Tune's experiment, beside our files
TRACKING_STAGING = "tracking"  # files on their way to MLflow, removed once sent
TRACKING_SPOOL = "tracking-pending.jsonl"  # MLflow writes not yet sent, replayed by `resume`
TEST_LOOK = "test.json"  # the winner scored on the test segment, once (tuning/sweep/one_look.py)
TRAIN_LOOK = "train"  # a look's `by` when `train --look` took it (tuning/cli/train_look.py), not the sweep
DRIVER = "driver.json"  # the process driving the sweep now (tuning/sweep/driver_mark.py)
RAY_LOG = "ray.log"  # Ray's own messages, kept out of the progress lines (tuning/cli/ray_output.py)


def is_uri(storage: str) -> bool:
    """s3://bucket/sweeps and the like (a filesystem every node reaches), as opposed to a folder path."""
    return "://" in storage


def default_storage() -> str:
    """Every --storage's default: MAMBA_TUNE_STORAGE where set, else runs/sweeps. Read when the parser is built (its
    --help shows it), and refused as --storage is when it holds credentials (UsageError)."""
    storage = os.environ.get(STORAGE_ENV, "").strip() or LOCAL_STORAGE
    refuse_credentials(STORAGE_ENV, storage, STORAGE_CREDENTIALS)
    return storage


def default_storage_help() -> str:
    """How --help names the default storage: its value, and where it comes from."""
    if os.environ.get(STORAGE_ENV, "").strip():
        return f"default {default_storage()}, from {STORAGE_ENV}"
    return f"default {LOCAL_STORAGE}, or {STORAGE_ENV} where set"


def storage_flag(storage: str) -> str:
    """The ` --storage X` a command about a sweep in `storage` needs: "" only for runs/sweeps where no
    MAMBA_TUNE_STORAGE sets another default, so that the command means the same wherever it is run."""
    return "" if storage == LOCAL_STORAGE == default_storage() else f" --storage {shlex.quote(storage)}"


def valid_name(name: Any) -> bool:
    """A sweep name: letters, digits, '-' and '_' (it names a folder and an Optuna study)."""
    return isinstance(name, str) and name.replace("-", "").replace("_", "").isalnum()


def storage_holds(location: str) -> bool:
    """Whether the folder or URI (s3://bucket/sweeps/NAME/tune) exists and holds anything.

    Raises UsageError when a URI's file system cannot be reached (credentials, network)."""
    if not is_uri(location):
        folder = Path(location)
        return folder.is_dir() and any(folder.iterdir())
    import pyarrow.fs

    try:
        fs, path = pyarrow.fs.FileSystem.from_uri(location)
        return bool(fs.get_file_info(pyarrow.fs.FileSelector(path, allow_not_found=True, recursive=False)))
    except (OSError, ValueError) as exc:  # pyarrow's ArrowIOError and ArrowInvalid derive from these
        raise UsageError(f"--storage {location}: cannot be read ({str(exc).splitlines()[0]}); check the URI and "
                         "the credentials in the environment or the node's instance profile") from None


def read_test_looks(folder: Path) -> list[dict[str, Any]]:
    """Every look the sweep took at its test segment, the first first (test.json, tuning/sweep/one_look.py); []
    before its first. A test.json written before looks were kept as a list holds one look, the object itself."""
    path = folder / TEST_LOOK
    if not path.exists():
        return []
    looks = json.loads(path.read_text())
    return looks if isinstance(looks, list) else [looks]


def append_look(folder: Path, entry: dict[str, Any]) -> dict[str, Any]:
    """`entry` added to the sweep's test.json as its next look, numbered (`look`: the count of looks with it) and
    timed (UTC, to the second), the file replaced whole (atomically); -> the look as written. The sweep's own look
    (tuning/sweep/one_look.py) and `train --look`'s (tuning/cli/train_look.py) both go through here."""
    looks = read_test_looks(folder)
    look = {"look": len(looks) + 1, "time": datetime.now(timezone.utc).isoformat(timespec="seconds"), **entry}
    write_text_atomic(folder / TEST_LOOK, json.dumps([*looks, look], indent=1))
    return look


def sweep_looks(looks: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The looks the sweep took at its winners, in order: `looks` (read_test_looks) less those `train --look` took
    (`by` TRAIN_LOOK), which scored a model trained again, not a trial the sweep chose. Those count among the
    looks (test_looks, `look k of n`); they are never the sweep's verdict, its headline test_loss or its winner's
    look."""
    return [look for look in looks if look.get("by") != TRAIN_LOOK]


def latest_look(folder: Path, trial_id: str) -> dict[str, Any] | None:
    """The newest look the sweep took at the test segment that scored trial `trial_id` (sweep_looks: a train look
    is none); None when none did."""
    return next((look for look in reversed(sweep_looks(read_test_looks(folder))) if look["trial_id"] == trial_id),
                None)


def unwritable_reason(folder: Path) -> str | None:
    """Why `folder` cannot be created or written here, or None; it is not created."""
    existing = folder.expanduser().resolve()
    while not existing.exists():
        existing = existing.parent
    if not existing.is_dir():
        return f"{existing} is a file, not a folder"
    if not os.access(existing, os.W_OK | os.X_OK):  # permissions, or a read-only file system (even for root)
        return f"{existing} is not writable (permissions or a read-only file system)"
    return None


@dataclass(frozen=True)
class SweepPaths:
    name: str
    folder: Path  # local: manifest, ledger, study (with a URI storage, copies of the records kept there too)
    ray_storage: str  # the Tune experiment's parent: a path, or a URI such as s3://bucket/sweeps
    study: str | None = None  # the Optuna study's database URL (postgresql://...); None: SQLite in `folder`

    @property
    def sweep_storage(self) -> str:
        return f"{self.ray_storage.rstrip('/')}/{self.name}"

    @property
    def experiment(self) -> str:
        return f"{self.sweep_storage}/{TUNE_DIR}"

    @property
    def study_url(self) -> str:
        return self.study or f"sqlite:///{self.folder / STUDY}"


def sweep_paths(storage: str, name: str) -> SweepPaths:
    """Where a sweep lives: all in <storage>/<name>, or with a URI storage, its local files in runs/sweeps/<name>.

    Raises UsageError for a name that is not one (it could name a folder outside the storage) and for a URI
    that holds credentials.
    """
    if not valid_name(name):
        raise UsageError(f"sweep name {name!r}: use letters, digits, '-' or '_' (it names a folder and an Optuna "
                         "study); `mamba-tune list` shows the sweeps there are")
    refuse_credentials("--storage", storage, STORAGE_CREDENTIALS)
    if is_uri(storage):
        return SweepPaths(name, Path(LOCAL_STORAGE).resolve() / name, storage)
    root = Path(storage).expanduser().resolve()
    return SweepPaths(name, root / name, str(root))
