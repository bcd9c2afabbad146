"""URIs that carry credentials are refused: a sweep keeps its storage and tracking URIs in sweep.json, MLflow's
parameters and the lines it prints, where a password or secret key would be kept too.

A credential is "user:password@", or a part KEY=value wherever it stands, for a KEY in SECRET_KEYS (any case):
a query parameter (s3://bucket?secret_key=..., an Azure SAS's sig=..., a presigned URL's Signature=...), a ';'
parameter or a folder of the path, the fragment, or inside a connection string given as a value
(...;AccountKey=...), percent-encoded or not.

The user and password are found as the parser that reads the URI finds them. A database URL (DATABASE_SCHEMES,
with or without a +driver) is read by SQLAlchemy (MLflow's and Optuna's stores), with its own pattern: a user
without ':' or '/', then ':' and a password that runs to the next '@' whatever it holds, even '/', '?' or a query:
postgresql://bob:pa/ss@host/db sends the password "pa/ss" (urllib would read a host "bob" there), and
postgresql://h:5432/db?sslrootcert=/c/ca@1.pem the password "5432/db?sslrootcert=/c/ca" to the host "1.pem"
(write that '@' as %40). Any other URL is read as urllib, urllib3 and requests read it: the authority runs to the
first '/', '?' or '#' and the user and password stand before its last '@' (https://host?to=a@b.com has none); an
authority whose port is no number with an '@' after it (https://bob:pa/ss@host) is a password cut short, refused
as one: no client can use that URL, and it would be kept.

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
# The schemes SQLAlchemy reads (its dialects and the common third-party ones), each also as NAME+DRIVER; lower case
DATABASE_SCHEMES = frozenset({
    "postgresql", "postgres", "mysql", "mariadb", "sqlite", "mssql", "oracle", "cockroachdb", "redshift", "snowflake",
    "databricks", "trino", "presto", "hive", "duckdb", "clickhouse", "firebird", "sybase", "db2", "ibm_db_sa",
    "teradatasql", "hana", "vertica", "bigquery", "awsathena", "spanner", "crate", "exasol", "yugabytedb",
    "singlestoredb", "tidb", "access", "informix"})
# The start of sqlalchemy.engine.url._parse_url's pattern (SQLAlchemy 2.x), as it is: the name, then the optional
# "username[:password]@" (tests/tuning/test_uri_secrets.py checks the two agree on make_url's username and password)
_SQLALCHEMY_USERINFO = re.compile(r"(?P<name>[\w\+]+)://(?:(?P<username>[^:/]*)(?::(?P<password>[^@]*))?@)?")


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
                         f"through {instead}{_AT_PAST_THE_HOST if _userinfo_past_the_host(uri) else ''}")


# Where the user and password end past the authority: the '@' may have been meant for a path or query
_AT_PAST_THE_HOST = (" (an '@' after the host's ':' ends a user:password, even past a '/', '?' or '#'; write an '@' "
                     "of a path or query as %40)")


def _userinfo_past_the_host(uri: str) -> bool:
    """Whether `userinfo_in` finds a user and password in `uri` though its authority (up to the first '/', '?' or
    '#') has no '@'."""
    authority = re.split(r"[/?#]", uri.partition("://")[2], maxsplit=1)[0]
    return "@" not in authority and userinfo_in(uri) is not None


def _keys(text: str) -> list[str]:
    """The KEY of every KEY=value part of `text`, as written, percent-decoded as often as it was encoded."""
    while (decoded := unquote(text)) != text:
        text = decoded
    return [part.partition("=")[0].strip() for part in _PARTS.split(text) if "=" in part]


def userinfo_in(uri: str) -> str | None:
    """The "user[:password]" before the host of `scheme://...`, as the parser of its scheme reads it: SQLAlchemy for
    a database URL, urllib for any other (see the module's docstring); None where it finds none. The caller never
    shows it."""
    scheme, sep, rest = uri.partition("://")
    if not sep:
        return None
    authority = re.split(r"[/?#]", rest, maxsplit=1)[0]
    found = [authority.rpartition("@")[0]] if "@" in authority else []
    if is_database_url(uri):  # SQLAlchemy finds whatever urllib finds, and more: the longer is the one cut off
        if (match := _SQLALCHEMY_USERINFO.match(uri)) and match.end() > len(match.group("name")) + 3:
            found.append(uri[len(match.group("name")) + 3:match.end() - 1])
    elif not found and "@" in rest[len(authority):] and _port_is_no_number(authority):
        found.append(authority)  # bob:pa/ss@host: a password cut short, refused whole
    return max(found, key=len) if found else None


def is_database_url(uri: str) -> bool:
    """Whether SQLAlchemy reads `uri`: its scheme, less any +DRIVER, is one of DATABASE_SCHEMES (any case)."""
    scheme = uri.partition("://")[0]
    return scheme.lower().partition("+")[0] in DATABASE_SCHEMES


def _port_is_no_number(authority: str) -> bool:
    """Whether the HOST:PORT `authority` (an IPv6 host in brackets) has a ':' and, after it, no number (AKIA:/x or
    bob:pa: the start of a password)."""
    hostport = authority.rpartition("]")[2] if authority.startswith("[") else authority
    return ":" in hostport and not hostport.partition(":")[2].isdigit()


def _without_userinfo(uri: str) -> str:
    """`uri` from its scheme on, without the user and password `userinfo_in` finds, nor any text up to the last '@'
    before the host that follows them (bob:p@ss@host: SQLAlchemy's password is 'p', the user's 'p@ss')."""
    if (userinfo := userinfo_in(uri)) is None:
        return uri
    scheme, _, rest = uri.partition("://")
    after = rest[len(userinfo):]
    if not after.startswith("@"):  # a password cut short (bob:pa/x?y/ss@host): nothing shown up to its last '@'
        return f"{scheme}://{after[after.rfind('@') + 1:]}"
    rest = after[1:]
    host_end = re.search(r"[/?#]", rest)
    host = rest[:host_end.start()] if host_end else rest
    return f"{scheme}://{rest[host.rfind('@') + 1:]}"
