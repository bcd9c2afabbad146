"""URIs that carry credentials, in any of their common forms, are refused without the secret ever being shown
(tuning/uri_secrets.py)."""

from __future__ import annotations

import pytest

from tuning.errors import UsageError
from tuning.tracking.store import resolve_store
from tuning.uri_secrets import credentials_in, refuse_credentials, userinfo_in, without_secrets

SECRET = "Zm9vYmFy" + "c2VjcmV0dmFsdWU"  # split, as tests/reliability/test_unsafe_input.py does: nothing key-like here
AZURE = "https://acct.blob.core.windows.net/sweeps"
FORMS = {  # form: (URI, the credential named, the URI as shown)
    "user:password@": (f"https://alice:{SECRET}@mlflow.example.com:5000", "user:password@",
                       "https://mlflow.example.com:5000"),
    "Azure SAS sig": (f"{AZURE}?sv=2022-11-02&sp=rwdl&se=2030-01-01T00%3A00Z&sig={SECRET}", "sig", AZURE),
    "AccountKey query": (f"{AZURE}?AccountKey={SECRET}", "AccountKey", AZURE),
    "AccountKey in a connection string": (
        f"{AZURE}?conn=DefaultEndpointsProtocol=https;AccountName=acct;AccountKey={SECRET};EndpointSuffix=core",
        "AccountKey", AZURE),
    "AccountKey percent-encoded": (f"{AZURE}?conn=AccountName%3Dacct%3BAccountKey%3D{SECRET}", "AccountKey", AZURE),
    "AccountKey path parameter": (f"{AZURE};AccountName=acct;AccountKey={SECRET}", "AccountKey", AZURE),
    "AccountKey path folder": (f"{AZURE}/AccountKey={SECRET}/k", "AccountKey", AZURE),
    "AccountKey fragment": (f"{AZURE}#AccountKey={SECRET}", "AccountKey", AZURE),
    "client_secret": (f"{AZURE}?tenant_id=t&client_id=c&client_secret={SECRET}", "client_secret", AZURE),
    "access_token": (f"gs://bucket/sweeps?access_token={SECRET}", "access_token", "gs://bucket/sweeps"),
    "token": (f"https://mlflow.example.com/?token={SECRET}", "token", "https://mlflow.example.com/"),
    "password, upper case": (f"https://mlflow.example.com/?PASSWORD={SECRET}", "PASSWORD",
                             "https://mlflow.example.com/"),
    "secret_key": (f"s3://bucket/sweeps?region=us-east-1&secret_key={SECRET}", "secret_key", "s3://bucket/sweeps"),
    "S3 presigned": (f"s3://bucket/sweeps?X-Amz-Credential=id&X-Amz-Signature={SECRET}",
                     "X-Amz-Credential, X-Amz-Signature", "s3://bucket/sweeps"),
    "S3 SigV2 signed": (f"https://bucket.s3.amazonaws.com/sweeps?AWSAccessKeyId=AKIAEXAMPLE&Expires=1700000000"
                        f"&Signature={SECRET}", "AWSAccessKeyId, Signature", "https://bucket.s3.amazonaws.com/sweeps"),
    "GCS V2 signed": (f"https://storage.googleapis.com/bucket/sweeps?GoogleAccessId=sa@p.iam.gserviceaccount.com"
                      f"&Expires=1700000000&Signature={SECRET}", "GoogleAccessId, Signature",
                      "https://storage.googleapis.com/bucket/sweeps"),
    "a password with '/', as SQLAlchemy reads it": (f"postgresql://bob:pa/{SECRET}@db.example.com/optuna",
                                                    "user:password@", "postgresql://db.example.com/optuna"),
    "a password with '?', as SQLAlchemy reads it": (f"postgresql://bob:pa?{SECRET}@db.example.com/optuna",
                                                    "user:password@", "postgresql://db.example.com/optuna"),
    "a password with '@'": (f"https://bob:p@{SECRET}@mlflow.example.com/", "user:password@",
                            "https://mlflow.example.com/"),
}


# The forms whose password ends past the first '/', '?' or '#': their refusal says how an '@' of a path is written
PAST_THE_HOST = {"a password with '/', as SQLAlchemy reads it", "a password with '?', as SQLAlchemy reads it"}
ENCODE_IT = r" \(an '@' after the host's ':' ends a user:password, .*; write an '@' of a path or query as %40\)"


@pytest.mark.parametrize("form", FORMS)
def test_refuse_credentials_names_each_form_and_never_shows_the_secret(form):
    uri, named, shown = FORMS[form]
    with pytest.raises(UsageError, match=rf"^--storage {shown} holds credentials \({named}\), which would be kept "
                                         r"in sweep\.json, MLflow and printed lines; give the URI without them and "
                                         r"the credentials through the environment"
                                         rf"{ENCODE_IT if form in PAST_THE_HOST else ''}$") as refused:
        refuse_credentials("--storage", uri, "the environment")
    assert SECRET not in str(refused.value)


@pytest.mark.parametrize("uri", ["s3://bucket/sweeps?region=us-east-1&endpoint_override=localhost:9000",
                                 "https://mlflow.example.com:5000", "sqlite:////data/optuna.db", "runs/sweeps",
                                 "gs://bucket/design-tokens/sweeps?tokenizer=bpe&signature_check=1",
                                 "postgresql://alice@db.example.com/optuna"])
def test_credentials_in_finds_none_in_plain_uris_and_names_that_only_contain_a_key(uri):
    assert [found for found in credentials_in(uri) if found != "user@"] == []


def test_without_secrets_keeps_scheme_host_and_path():
    assert without_secrets("s3://bucket/sweeps/k?region=us-east-1#x") == "s3://bucket/sweeps/k"
    assert without_secrets("file:///tmp/mlruns") == "file:///tmp/mlruns"


@pytest.mark.parametrize("uri", [f"postgresql://alice:{SECRET}@db.example.com/mlflow",
                                 f"sqlite:///runs/mlflow/mlflow.db?password={SECRET}",
                                 f"file:///tmp/mlruns;AccountKey={SECRET}"],
                         ids=["postgresql password", "sqlite query", "file AccountKey"])
def test_resolve_store_refuses_credentials_in_any_tracking_uri_before_its_scheme(uri):
    with pytest.raises(UsageError, match=r"^tracking URI \(--tracking-uri or MLFLOW_TRACKING_URI\) \S+ holds "
                                         r"credentials") as refused:
        resolve_store(uri)
    assert SECRET not in str(refused.value)


@pytest.mark.parametrize("url", [f"https://db.example.com/optuna?password={SECRET}",
                                 f"postgresql://alice:{SECRET}@db.example.com/optuna"])
def test_check_study_url_refuses_credentials_before_it_says_what_the_url_is(url):
    from tuning.search.study_store import check_study_url

    with pytest.raises(UsageError, match=r"^--study-url .* holds credentials") as refused:
        check_study_url(url)  # the first is no database URL either: that line would show it whole
    assert SECRET not in str(refused.value)


@pytest.mark.parametrize("uri", ["s3://bucket/sweeps@v2/k", "file:///tmp/runs@home/mlruns",
                                 "gs://bucket/a:b@c/sweeps"])
def test_credentials_in_finds_no_user_in_an_at_sign_of_the_path(uri):
    assert credentials_in(uri) == []


def test_check_study_url_refuses_a_password_with_a_slash_that_urllib_reads_as_a_port():
    from tuning.search.study_store import check_study_url

    with pytest.raises(UsageError, match=r"^--study-url postgresql://db\.example\.com/optuna holds credentials "
                                         r"\(user:password@\)") as refused:
        check_study_url(f"postgresql://bob:pa/{SECRET}@db.example.com/optuna")
    assert SECRET not in str(refused.value)


def test_credentials_in_refuses_a_malformed_uri_in_one_line_without_showing_it():
    with pytest.raises(UsageError, match=r"^a URI given is not one \(") as refused:
        credentials_in(f"s3://[{SECRET}")
    assert SECRET not in str(refused.value)


@pytest.mark.parametrize("uri", ["https://hooks.example.com?to=a@b.com", "http://host:5000/x@y",
                                 "https://[::1]:5000/x@y", "s3://bucket/k?versions=a:b@c",
                                 "postgresql://h:5432/db?sslrootcert=/c/ca%401.pem",
                                 "postgresql://h/db?sslrootcert=/c/ca@1.pem", "sqlite:////tmp/a:b@c.db"])
def test_credentials_in_finds_no_user_in_an_at_sign_past_the_authority_as_its_reader_reads_it(uri):
    assert credentials_in(uri) == []


def test_userinfo_in_reads_a_database_url_as_sqlalchemy_and_any_other_as_urllib():
    assert userinfo_in("postgresql+psycopg2://h:5432/x@y/db") == "h:5432/x"  # SQLAlchemy: host y, password 5432/x
    assert userinfo_in("https://h:5432/x@y/db") is None  # urllib: host h, port 5432, path /x@y/db
    assert userinfo_in("postgresql://bob:p@ss@host/db") == "bob:p@ss"  # SQLAlchemy's "bob:p", cut at urllib's '@'


@pytest.mark.parametrize("uri", [
    "postgresql://h:5432/db?sslrootcert=/c/ca@1.pem", "postgresql://h:5432/db?sslrootcert=/c/ca%401.pem",
    "postgresql://h/db?sslrootcert=/c/ca@1.pem", "postgresql://bob:pa/ss@host/db", "postgresql://bob:pa?ss@host/db",
    "postgresql://bob:p@ss@host/db", "postgresql://alice@h/db", "postgresql://:pw@h/db", "postgresql://@h/db",
    "mysql+pymysql://h?x=a:b@c", "mysql://h/db?x=a@b", "postgresql://h:5432/x@y", "sqlite:///a@b.db",
    "sqlite:////tmp/a:b@c.db", "postgresql+psycopg2://[::1]:5432/db", "mssql+pyodbc://u:p@dsn"])
def test_userinfo_in_agrees_with_sqlalchemy_on_database_urls(uri):
    make_url = pytest.importorskip("sqlalchemy.engine").make_url
    url = make_url(uri)
    assert (userinfo_in(uri) is not None) == (url.username is not None or url.password is not None)
    assert ("user:password@" in credentials_in(uri)) == (url.password is not None)


def test_refuse_credentials_refuses_a_query_at_sign_that_sqlalchemy_reads_as_a_password_and_says_to_encode_it():
    with pytest.raises(UsageError, match=r"^--study-url postgresql://1\.pem holds credentials \(user:password@\), "
                                         r".* \(an '@' after the host's ':' ends a user:password, even past a '/', "
                                         r"'\?' or '#'; write an '@' of a path or query as %40\)$"):
        refuse_credentials("--study-url", "postgresql://h:5432/db?sslrootcert=/c/ca@1.pem", "the environment")


@pytest.mark.parametrize("uri", [f"https://bob:pa/{SECRET}@mlflow.example.com/", f"s3://AKIAEXAMPLE:/{SECRET}@bucket/k",
                                 f"https://bob:pa?{SECRET}@mlflow.example.com/",
                                 f"https://bob:pa/x/{SECRET}@mlflow.example.com/", f"s3://AKIA:/x/{SECRET}@bucket/k",
                                 f"https://bob:pa/x?y/{SECRET}@mlflow.example.com/"])
def test_refuse_credentials_refuses_a_password_cut_short_by_urllib_at_a_port_that_is_no_number(uri):
    with pytest.raises(UsageError, match=r"^--storage \S+ holds credentials \(user:password@\), .*write an '@' of a "
                                         r"path or query as %40\)$") as refused:
        refuse_credentials("--storage", uri, "the environment")
    assert SECRET not in str(refused.value) and "bob" not in str(refused.value)
