"""Where a bars file is: a local path, or an object named by an s3:// or gs:// URI, read with pyarrow's filesystems.

Credentials come from the environment alone (CREDENTIALS), never from the URI or a configuration file, so that
nothing a sweep keeps (its manifest, MLflow) holds a secret. A sweep's driver reads the object; its trials get the
Dataset from Ray's object store and need no credentials. Every failure is a one-line DataError naming the object.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import BinaryIO

import pyarrow as pa
import pyarrow.fs as pafs

from model.errors import InputError

REMOTE_SCHEMES = ("s3", "gs")
SCHEME_CREDENTIALS = {
    "s3": "AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN, AWS_DEFAULT_REGION and AWS_ENDPOINT_URL "
          "(an S3-compatible store)",
    "gs": "GOOGLE_APPLICATION_CREDENTIALS"}
CREDENTIALS = ("the environment: " + " for s3://, ".join(SCHEME_CREDENTIALS.values()) + " for gs://")
# A gs:// read without credentials retries for Google's default of many minutes; a retry stops after this long
# unless the URI says otherwise (?retry_limit_seconds=N)
GCS_RETRY_SECONDS = 60
_REASON_CHARS = 300  # of a store's error message, in the one line that says why a read failed
_GOOGLE_CAUSE = "The underlying error message was: "  # google-cloud-cpp's long messages end with their cause
_GOOGLE_DETAIL = re.compile(r",? (error_info=|gcloud-cpp\.)")  # and its details, after the cause


class RemoteDataError(InputError, ValueError):
    """An object that cannot be read: one line, `<what>, <rule>, <fix>` (model/bars.py's DataError alike)."""


def bars_location(source: str | Path) -> str | Path:
    """The bars file `source` names: a URI of REMOTE_SCHEMES stays text (a Path would fold its '//'), anything
    else is a Path. An unknown scheme is refused."""
    text = str(source)
    if isinstance(source, Path) or "://" not in text:
        return Path(source)
    scheme = text.partition("://")[0].lower()
    if scheme not in REMOTE_SCHEMES:
        raise RemoteDataError(f"{text}: unknown scheme {scheme}://, bars are read from a path, s3://BUCKET/KEY or "
                              "gs://BUCKET/KEY; copy the file there or to this machine")
    return text


def is_remote(source: str | Path) -> bool:
    """Whether `source` names an object in a store (s3://, gs://) rather than a local file."""
    return isinstance(source, str) and "://" in source


def location_text(source: str | Path) -> str:
    """How a sweep records `source`: a URI as given, a path made absolute."""
    return source if is_remote(source) else str(Path(source).resolve())


def require_object(uri: str) -> None:
    """Raise RemoteDataError unless the URI names an object these credentials may read the metadata of."""
    filesystem, path = _filesystem(uri)
    try:
        found = filesystem.get_file_info(path).type
    except (OSError, pa.ArrowException) as exc:
        raise _unreadable(uri, exc) from None
    if found != pafs.FileType.File:
        raise _missing(uri, path)


def open_object(uri: str) -> pa.NativeFile:
    """The object at `uri`, for random access (a Parquet reader fetches only the byte ranges it needs)."""
    return _opened(uri, "open_input_file")


def open_bytes(source: str | Path) -> BinaryIO | pa.NativeFile:
    """A stream of the bytes of the file or object `source`, read front to back (e.g. to hash it)."""
    if not is_remote(source):
        return open(source, "rb")
    return _opened(str(source), "open_input_stream")


def _opened(uri: str, how: str) -> pa.NativeFile:
    """The object at `uri` opened by its filesystem's method `how`; RemoteDataError when missing or unreadable."""
    filesystem, path = _filesystem(uri)
    try:
        return getattr(filesystem, how)(path)
    except FileNotFoundError:
        raise _missing(uri, path) from None
    except (OSError, pa.ArrowException) as exc:
        raise _unreadable(uri, exc) from None


def _filesystem(uri: str) -> tuple[pafs.FileSystem, str]:
    """pyarrow's filesystem of the URI (credentials from the environment) and the object's path in it."""
    bars_location(uri)  # a scheme other than REMOTE_SCHEMES never reaches pyarrow
    if uri.lower().startswith("gs://") and "retry_limit_seconds=" not in uri:
        uri = f"{uri}{'&' if '?' in uri else '?'}retry_limit_seconds={GCS_RETRY_SECONDS}"
    try:
        return pafs.FileSystem.from_uri(uri)
    except (OSError, pa.ArrowException) as exc:  # e.g. no bucket, or its region could not be asked for
        raise _unreadable(uri.partition("?")[0], exc) from None


def _missing(uri: str, path: str) -> RemoteDataError:
    bucket, _, key = path.partition("/")
    return RemoteDataError(f"{uri}: no such object (bucket {bucket!r}, key {key!r}), the data must be an existing "
                           f"Parquet object; check the URI, and that the credentials, which come from the "
                           f"environment ({_credentials(uri)}), may read it")


def _unreadable(uri: str, exc: BaseException) -> RemoteDataError:
    reason = " ".join(str(exc).split())  # one line, however long the store's message
    reason = _GOOGLE_DETAIL.split(reason.rpartition(_GOOGLE_CAUSE)[2])[0][:_REASON_CHARS]
    return RemoteDataError(f"{uri}: cannot be read ({reason}), the data must be an object these credentials may "
                           f"read; credentials come from the environment alone ({_credentials(uri)}): check them "
                           "and the URI")


def _credentials(uri: str) -> str:
    """The environment variables the store of `uri` takes its credentials from."""
    return SCHEME_CREDENTIALS.get(uri.partition("://")[0].lower(), CREDENTIALS)
