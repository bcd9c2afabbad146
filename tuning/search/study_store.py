"""Where a sweep's Optuna study lives: SQLite in the sweep's folder (the default), or a database of its own given
by `--study-url` (PostgreSQL for a cluster: the study then outlives the head, tuning/sweep/record_copies.py).

The URL is kept in sweep.json and printed, so it carries no password (a user name is fine): the database's
client library reads it from the environment (libpq: PGPASSWORD or ~/.pgpass; PGUSER when the URL names none).
"""

from __future__ import annotations

from urllib.parse import urlsplit

from tuning.errors import UsageError
from tuning.uri_secrets import credentials_in, refuse_credentials

SCHEMES = ("sqlite", "postgresql", "mysql")  # SQLAlchemy's dialects Optuna's RDBStorage supports, "+driver" allowed
STUDY_CREDENTIALS = "the environment (PostgreSQL: PGPASSWORD or ~/.pgpass; MySQL: an option file)"


def check_study_url(url: str) -> None:
    """Refuse a --study-url that is not a database URL Optuna can use, or that holds credentials."""
    if [found for found in credentials_in(url) if found != "user@"]:  # a user name is no secret: a password is
        refuse_credentials("--study-url", url, STUDY_CREDENTIALS)  # first: no other line may echo a secret
    scheme = urlsplit(url).scheme.partition("+")[0] if "://" in url else ""
    if scheme not in SCHEMES:
        raise UsageError(f"--study-url {url!r}: not a database URL; give postgresql://HOST[:PORT]/DB (or "
                         "sqlite:////path/optuna.db, mysql://HOST/DB)")


def study_exists(url: str, name: str) -> bool:
    """Whether the database at `url` holds a study named `name`; raises UsageError when it cannot be opened."""
    import optuna

    try:
        storage = optuna.storages.RDBStorage(url)
        return any(study.study_name == name for study in storage.get_all_studies())
    except Exception as exc:  # noqa: BLE001 - SQLAlchemy's errors (no server, no driver, refused login) in one line
        reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise UsageError(f"--study-url {url}: cannot open the study's database ({reason}); check that it runs, "
                         f"that this machine reaches it and the credentials in {STUDY_CREDENTIALS}") from None
