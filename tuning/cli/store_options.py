"""--tracking-uri and --storage: one metavar and one help in every command that has them.

What --tracking-uri accepts is what tuning/tracking/store.py's resolve_store takes: http(s)://HOST:PORT of an
`mlflow server`, or sqlite:///FILE of a local store (its artifacts in artifacts/ beside FILE); any other scheme
(a folder, file:, databricks) is refused, and so are credentials in the URI.
"""

from __future__ import annotations

import argparse

from tuning.sweep_files import default_storage, default_storage_help
from tuning.tracking.store import DATABASE, DEFAULT_TRACKING_DIR
from tuning.uri_secrets import TRACKING_CREDENTIALS

TRACKING_URI_HELP = (
    "the MLflow tracking store: http(s)://HOST:PORT of an `mlflow server`, or sqlite:///FILE of a local one (its "
    "artifacts in artifacts/ beside FILE); no other scheme, and no credentials in it (they go in "
    f"{TRACKING_CREDENTIALS}). Default: at resume, best and ui NAME --storage, the store the sweep logged to; "
    "elsewhere "
    f"MLFLOW_TRACKING_URI, else the embedded store, sqlite:///{DEFAULT_TRACKING_DIR}/{DATABASE}")
STORAGE_ACCEPTS = "a folder, or a URI every node reaches (s3://BUCKET/PATH, gs://BUCKET/PATH)"


def add_tracking_uri_option(parser: argparse.ArgumentParser) -> None:
    """--tracking-uri URI, the same in every command (resolve_store reads it)."""
    parser.add_argument("--tracking-uri", metavar="URI", help=TRACKING_URI_HELP)


def add_storage_option(parser: argparse.ArgumentParser, what: str) -> None:
    """--storage STORAGE, default runs/sweeps (or MAMBA_TUNE_STORAGE): `what` it is to this command, then what it
    accepts and its default, the same in every command."""
    parser.add_argument("--storage", default=default_storage(), help=storage_help(what))


def storage_help(what: str, default: str | None = None) -> str:
    """--storage's help: 'where the sweep lives: a folder, or a URI ... (default runs/sweeps, ...)'; `default` in
    place of the usual default where the command has another (`ui`: none, every run of the experiment)."""
    return f"{what}: {STORAGE_ACCEPTS} ({default or default_storage_help()})"
