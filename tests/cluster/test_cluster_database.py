"""cluster.yaml's head setup for the PostgreSQL database outside the cluster (docs/cluster-aws.md: the cluster recipe), run in
bash against a real PostgreSQL server: the password goes from SSM Parameter Store (a stand-in `aws` here) into a
~/.pgpass only its owner reads, the studies' database is made once, and `ray up` may run it again."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

import psycopg
import pytest

from tests.postgres_server import PostgresServer

pytestmark = pytest.mark.integration


def database_setup(config: dict) -> list[str]:
    """The head setup commands that set up the database."""
    return [c for c in config["head_setup_commands"] if "FILL-IN-DB-HOST" in c]


def run_setup(commands: list[str], home: Path, server: PostgresServer) -> subprocess.CompletedProcess:
    """`commands` in bash as `ray up` runs them on the head, the host filled in and `aws` answering with the password."""
    fakes = home / "fakes"
    for folder in (home / "venv" / "bin", fakes):
        folder.mkdir(parents=True, exist_ok=True)
    scripts = {home / "venv" / "bin" / "python": f'exec {sys.executable} "$@"',  # the head's venv: this one
               fakes / "aws": f'echo "aws $*" >> {home / "aws-calls"}\necho {server.password}'}
    for path, body in scripts.items():
        path.write_text(f"#!/bin/sh\n{body}\n")
        path.chmod(0o755)
    script = "\n".join(c.replace("FILL-IN-DB-HOST", "127.0.0.1").replace("FILL-IN-REGION", "us-east-1")
                       for c in commands)
    env = {**os.environ, "HOME": str(home), "PATH": f"{fakes}:{os.environ['PATH']}", "PGPORT": str(server.port)}
    env.pop("PGPASSWORD", None)
    return subprocess.run(["bash", "-e", "-c", script], env=env, capture_output=True, text=True, timeout=120)


def databases(server: PostgresServer) -> set[str]:
    with psycopg.connect(host="127.0.0.1", port=server.port, dbname="postgres", user=server.user,
                         password=server.password) as connection:
        return {row[0] for row in connection.execute("SELECT datname FROM pg_database")}


def test_the_head_reads_the_database_password_into_pgpass_and_makes_the_studies_database_once(config, tmp_path,
                                                                                             postgres):
    commands = database_setup(config)
    assert len(commands) == 2
    postgres.create_database("mlflow")  # RDS makes it (--db-name mlflow)
    for _ in range(2):  # `ray up` on a live cluster runs the setup again
        done = run_setup(commands, tmp_path, postgres)
        assert done.returncode == 0, done.stderr
    pgpass = tmp_path / ".pgpass"
    assert pgpass.read_text() == f"127.0.0.1:*:*:mamba:{postgres.password}\n"
    assert stat.S_IMODE(pgpass.stat().st_mode) == 0o600  # libpq ignores a .pgpass others can read
    assert {"mlflow", "optuna"} <= databases(postgres)
    calls = (tmp_path / "aws-calls").read_text().splitlines()
    assert calls == ["aws ssm get-parameter --region us-east-1 --name /mamba-tune/db-password --with-decryption "
                     "--query Parameter.Value --output text"] * 2
    assert postgres.password not in " ".join(commands)


def test_mlflow_and_the_studies_reach_the_database_by_url_and_pgpass_alone(config, tmp_path, postgres):
    """The URLs cluster.yaml and docs/cluster-aws.md give, with the host filled in: the user in them, the password not."""
    postgres.create_database("mlflow")
    assert run_setup(database_setup(config), tmp_path, postgres).returncode == 0
    start = " ".join(config["head_start_ray_commands"])
    assert "--backend-store-uri postgresql://mamba@FILL-IN-DB-HOST:5432/mlflow" in start
    env = {**os.environ, "PGPASSFILE": str(tmp_path / ".pgpass")}
    env.pop("PGPASSWORD", None)
    for database in ("mlflow", "optuna"):
        url = f"postgresql://mamba@127.0.0.1:{postgres.port}/{database}"
        done = subprocess.run([sys.executable, "-c", "import sys, sqlalchemy; sqlalchemy.create_engine(sys.argv[1])"
                               ".connect().close()", url], env=env, capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, done.stderr[-2000:]
