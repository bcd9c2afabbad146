"""URIs that carry credentials are refused: a sweep keeps its storage and tracking URIs in sweep.json, MLflow's
parameters and the lines it prints, where a password or secret key would be kept too."""

from __future__ import annotations

from urllib.parse import parse_qsl, urlsplit

from tuning.errors import UsageError

# pyarrow's S3 and GCS file systems read these from a URI's query (s3://bucket?access_key=...&secret_key=...)
SECRET_QUERY_KEYS = frozenset({"access_key", "secret_key", "session_token", "access_token", "password", "token",
                               "credentials"})
STORAGE_CREDENTIALS = ("the environment (AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or AWS_PROFILE; "
                       "GOOGLE_APPLICATION_CREDENTIALS) or the node's instance profile")
TRACKING_CREDENTIALS = "MLFLOW_TRACKING_USERNAME and MLFLOW_TRACKING_PASSWORD (or MLFLOW_TRACKING_TOKEN)"


def credentials_in(uri: str) -> list[str]:
    """What in `uri` is a credential: "user:password@", "user@" or a secret query key; [] for a plain URI or path."""
    if "://" not in uri:
        return []
    parts = urlsplit(uri)
    found = []
    if parts.username is not None or parts.password is not None:
        found.append("user:password@" if parts.password is not None else "user@")
    found += sorted({key for key, _ in parse_qsl(parts.query, keep_blank_values=True)
                     if key.lower() in SECRET_QUERY_KEYS})
    return found


def refuse_credentials(what: str, uri: str, instead: str) -> None:
    """Raise UsageError naming (never showing) the credentials `uri` holds, and where they belong instead."""
    if found := credentials_in(uri):
        parts = urlsplit(uri)
        shown = f"{parts.scheme}://{parts.netloc.rpartition('@')[2]}{parts.path}"  # no user, password or query
        raise UsageError(f"{what} {shown} holds credentials ({', '.join(found)}), which would be kept in sweep.json, "
                         f"MLflow and printed lines; give the URI without them and the credentials through {instead}")
