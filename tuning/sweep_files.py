"""The names of a sweep's folder and files, without importing Ray (the CLI's --help needs them)."""

DEFAULT_STORAGE = "runs/sweeps"  # sweeps live in <storage>/<name>/
MANIFEST = "sweep.json"  # what was asked: data, space, trials
LEDGER = "trials.json"  # every finished trial and why it ended
STUDY = "optuna.db"  # the Optuna study
TUNE_DIR = "tune"  # Ray Tune's experiment, beside our files
TRACKING_STAGING = "tracking"  # files on their way to MLflow, removed once sent
TRACKING_SPOOL = "tracking-pending.jsonl"  # MLflow writes not yet sent, replayed by `resume`


def is_uri(storage: str) -> bool:
    """s3://bucket/sweeps and the like (a filesystem every node reaches), as opposed to a folder path."""
    return "://" in storage

