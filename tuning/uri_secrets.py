"""URIs that carry credentials are refused: a sweep keeps its storage and tracking URIs in sweep.json, MLflow's
parameters and the lines it prints, where a password or secret key would be kept too.

A credential is "user:password@", or a part KEY=value wherever it stands, for a KEY in SECRET_KEYS (any case):
a query parameter (s3://bucket?secret_key=..., an Azure SAS's sig=..., a presigned URL's Signature=...), a ';'
parameter or a folder of the path, the fragment, or inside a connection string given as a value
(...;AccountKey=...), percent-encoded or not.

The user and password are found as every parser that may read the URI finds them: urllib's (the text before the
last '@' of the part up to the first '/', '?' or '#') and SQLAlchemy's (a user without ':' or '/', then ':' and a
password that runs to the next '@' whatever it holds): postgresql://bob:pa/ss@host/db sends SQLAlchemy the password
"pa/ss", though urllib reads a host "bob" there. Either finding is a credential.

A refusal names the keys, never their values, and shows the URI without its user, query, fragment or parameters.
"""

from __future__ import annotations

import re
from urllib.parse import unquote, urlsplit

from tuning.errors import UsageError

# pyarrow's S3 and GCS file systems (query), Azure (SAS, connection strings, service principals), signed URLs
# (S3 SigV4 X-Amz-*, S3 SigV2 AWSAccessKeyId & Signature, GCS V4 X-Goog-*, GCS V2 GoogleAccessId & Signature,
# CloudFront's Signature & Key-Pair-Id, Alibaba OSS's OSSAccessKeyId & Signature & security-token), and the usual
# token and password parameters; lower case
SECRET_KEYS = frozenset({
    "access_key", "secret_key", "session_token", "access_token", "refresh_token", "id_token", "password", "passwd",
    "pwd", "token", "credentials", "secret", "client_secret", "api_key", "apikey", "private_key",
    "sig", "accountkey", "sharedaccesskey", "sharedaccesssignature", "sas_token",
    "x-amz-signature", "x-amz-credential", "x-amz-security-token", "x-goog-signature", "x-goog-credential",
    "signature", "awsaccesskeyid", "googleaccessid", "key-pair-id", "ossaccesskeyid", "security-token"})
STORAGE_CREDENTIALS = ("the environment (AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or AWS_PROFILE; "
                       "GOOGLE_APPLICATION_CREDENTIALS) or the node's instance profile")
TRACKING_CREDENTIALS = "MLFLOW_TRACKING_USERNAME and MLFLOW_TRACKING_PASSWORD (or MLFLOW_TRACKING_TOKEN)"
_PARTS = re.compile(r"[/;&?#@]")  # what separates KEY=value parts, wherever in a URI they stand
# SQLAlchemy's reading of what follows "scheme://": a user (no ':' or '/'), then ':' and a password up to an '@'
_SQLALCHEMY_USERINFO = re.compile(r"(?P<user>[^:/]*)(?::(?P<password>[^@]*))?@")


def credentials_in(uri: str) -> list[str]:
    """What in `uri` is a credential: "user:password@", "user@", then each secret KEY as written; [] for none."""
    found = []
    if "://" in uri:
        try:
            urlsplit(uri)
        except ValueError as exc:  # e.g. an unclosed '[' in the host; the URI is not shown: it may hold a secret
            raise UsageError(f"a URI given is not one ({exc}); check its brackets and characters") from None
        if (userinfo := userinfo_in(uri)) is not None:
            found.append("user:password@" if ":" in userinfo else "user@")
    keys: dict[str, str] = {}
    for key in _keys(uri.partition("://")[2] or uri):
        if key.lower() in SECRET_KEYS:
            keys.setdefault(key.lower(), key)
    return found + [keys[key] for key in sorted(keys)]


def without_secrets(uri: str) -> str:
    """`uri` as it may be shown: its scheme, host and path, without a user, password, query or fragment, and its
    path cut before the first ';' parameter or KEY=value folder."""
    parts = urlsplit(_without_userinfo(uri))
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


def userinfo_in(uri: str) -> str | None:
    """The "user[:password]" before the host of `scheme://...`, as urllib or SQLAlchemy reads it (the longer where
    both find one); None where neither does. The caller never shows it."""
    scheme, sep, rest = uri.partition("://")
    if not sep:
        return None
    authority = re.split(r"[/?#]", rest, maxsplit=1)[0]
    by_urllib = authority.rpartition("@")[0] if "@" in authority else None
    by_sqlalchemy = match.group(0)[:-1] if (match := _SQLALCHEMY_USERINFO.match(rest)) else None
    found = [info for info in (by_urllib, by_sqlalchemy) if info is not None]
    return max(found, key=len) if found else None


def _without_userinfo(uri: str) -> str:
    """`uri` from its scheme on, without the user and password `userinfo_in` finds, nor any text up to the last '@'
    before the host that follows them (bob:p@ss@host: SQLAlchemy's password is 'p', the user's 'p@ss')."""
    if (userinfo := userinfo_in(uri)) is None:
        return uri
    scheme, _, rest = uri.partition("://")
    rest = rest[len(userinfo) + 1:]
    host_end = re.search(r"[/?#]", rest)
    host = rest[:host_end.start()] if host_end else rest
    return f"{scheme}://{rest[host.rfind('@') + 1:]}"
