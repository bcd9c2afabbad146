"""URIs that carry credentials are refused: a sweep keeps its storage and tracking URIs in sweep.json, MLflow's
parameters and the lines it prints, where a password or secret key would be kept too.

A credential is "user:password@", or a part KEY=value wherever it stands, for a KEY in SECRET_KEYS (any case):
a query parameter (s3://bucket?secret_key=..., an Azure SAS's sig=...), a ';' parameter or a folder of the path,
the fragment, or inside a connection string given as a value (...;AccountKey=...), percent-encoded or not.
A refusal names the keys, never their values, and shows the URI without its user, query, fragment or parameters.
"""

from __future__ import annotations

import re
from urllib.parse import unquote, urlsplit

from tuning.errors import UsageError

# pyarrow's S3 and GCS file systems (query), Azure (SAS, connection strings, service principals), S3 and GCS
# presigned URLs, and the usual token and password parameters; lower case
SECRET_KEYS = frozenset({
    "access_key", "secret_key", "session_token", "access_token", "refresh_token", "id_token", "password", "passwd",
    "pwd", "token", "credentials", "secret", "client_secret", "api_key", "apikey", "private_key",
    "sig", "accountkey", "sharedaccesskey", "sharedaccesssignature", "sas_token",
    "x-amz-signature", "x-amz-credential", "x-amz-security-token", "x-goog-signature", "x-goog-credential"})
STORAGE_CREDENTIALS = ("the environment (AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or AWS_PROFILE; "
                       "GOOGLE_APPLICATION_CREDENTIALS) or the node's instance profile")
TRACKING_CREDENTIALS = "MLFLOW_TRACKING_USERNAME and MLFLOW_TRACKING_PASSWORD (or MLFLOW_TRACKING_TOKEN)"
_PARTS = re.compile(r"[/;&?#@]")  # what separates KEY=value parts, wherever in a URI they stand


def credentials_in(uri: str) -> list[str]:
    """What in `uri` is a credential: "user:password@", "user@", then each secret KEY as written; [] for none."""
    found = []
    if "://" in uri:
        try:
            parts = urlsplit(uri)
        except ValueError as exc:  # e.g. an unclosed '[' in the host; the URI is not shown: it may hold a secret
            raise UsageError(f"a URI given is not one ({exc}); check its brackets and characters") from None
        if parts.username is not None or parts.password is not None:
            found.append("user:password@" if parts.password is not None else "user@")
    keys: dict[str, str] = {}
    for key in _keys(uri.partition("://")[2] or uri):
        if key.lower() in SECRET_KEYS:
            keys.setdefault(key.lower(), key)
    return found + [keys[key] for key in sorted(keys)]


def without_secrets(uri: str) -> str:
    """`uri` as it may be shown: its scheme, host and path, without a user, password, query or fragment, and its
    path cut before the first ';' parameter or KEY=value folder."""
    parts = urlsplit(uri)
    host = parts.netloc.rpartition("@")[2].partition(";")[0]
    folders = []
    for folder in parts.path.split("/"):
        folder, parameters, _ = folder.partition(";")
        if _keys(folder):
            break
        folders.append(folder)
        if parameters:
            break
    path = "/".join(folders)
    if "://" in uri:
        return f"{parts.scheme}://{'' if _keys(host) else host}{path}"
    return f"{parts.scheme}:{path}" if parts.scheme else path


def refuse_credentials(what: str, uri: str, instead: str) -> None:
    """Raise UsageError naming (never showing) the credentials `uri` holds, and where they belong instead."""
    if found := credentials_in(uri):
        raise UsageError(f"{what} {without_secrets(uri)} holds credentials ({', '.join(found)}), which would be kept "
                         f"in sweep.json, MLflow and printed lines; give the URI without them and the credentials "
                         f"through {instead}")


def _keys(text: str) -> list[str]:
    """The KEY of every KEY=value part of `text`, as written, percent-decoded as often as it was encoded."""
    while (decoded := unquote(text)) != text:
        text = decoded
    return [part.partition("=")[0].strip() for part in _PARTS.split(text) if "=" in part]
