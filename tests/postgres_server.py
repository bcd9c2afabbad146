"""A throwaway PostgreSQL server (Debian's `initdb` and `pg_ctl`) on a free localhost port, with password login
for one user: the database a cluster's Optuna study and MLflow store live in (docs/cluster-aws.md: the cluster recipe).

PostgreSQL refuses to run as root: as root (CI), its folder belongs to the `postgres` user and it runs as that.
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import subprocess
import tempfile
from pathlib import Path

from tests.cli import free_port


def server_program(name: str) -> str:
    """initdb or pg_ctl: on the PATH, else the newest of Debian's /usr/lib/postgresql/VERSION/bin (`make test`
    installs them)."""
    found = shutil.which(name) or max(glob.glob(f"/usr/lib/postgresql/*/bin/{name}"),
                                      key=lambda p: int(Path(p).parts[-3]), default=None)
    if found is None:
        raise RuntimeError(f"{name}: PostgreSQL's server programs are not installed (`make test` installs them)")
    return found


class PostgresServer:
    user, password = "mamba", "test-server-password"  # a server that lives for one test, on loopback only

    def __init__(self) -> None:
        # Its own folder in /tmp: pytest's tmp_path is closed to other users, and the socket's path must be short.
        self.folder = Path(tempfile.mkdtemp(prefix="mamba-tune-pg-"))
        self.port = free_port()
        self.owner = pwd.getpwnam("postgres") if os.geteuid() == 0 else None

    @property
    def env(self) -> dict[str, str]:
        """What a client needs besides the URL: the credentials, from the environment as docs/cluster-aws.md says."""
        return {"PGUSER": self.user, "PGPASSWORD": self.password}

    def url(self, database: str) -> str:
        return f"postgresql://127.0.0.1:{self.port}/{database}"

    def start(self) -> None:
        (self.folder / "password").write_text(self.password)
        if self.owner is not None:
            for path in (self.folder, self.folder / "password"):
                os.chown(path, self.owner.pw_uid, self.owner.pw_gid)
        data = self.folder / "data"
        self._as_owner("initdb", "-D", data, "-U", self.user, "--pwfile", self.folder / "password",
                       "--auth", "scram-sha-256", "-E", "UTF8", "--no-instructions")
        self._as_owner("pg_ctl", "-D", data, "-l", self.folder / "server.log", "-w", "-t", "120", "-o",
                       f"-p {self.port} -k {self.folder} -c listen_addresses=127.0.0.1", "start")

    def create_database(self, name: str) -> str:
        """A new, empty database; -> its URL (without credentials: they come from `env`)."""
        import psycopg

        with psycopg.connect(host="127.0.0.1", port=self.port, dbname="postgres", user=self.user,
                             password=self.password, autocommit=True) as connection:
            connection.execute(f'CREATE DATABASE "{name}"')
        return self.url(name)

    def stop(self) -> None:
        """Stop it at once and remove its folder."""
        if (self.folder / "data" / "postmaster.pid").exists():
            self._as_owner("pg_ctl", "-D", self.folder / "data", "-m", "immediate", "-w", "stop")
        shutil.rmtree(self.folder, ignore_errors=True)

    def _as_owner(self, program: str, *args: object) -> None:
        command = [server_program(program), *map(str, args)]
        if self.owner is not None:
            command = ["runuser", "-u", "postgres", "--", *command]
        done = subprocess.run(command, capture_output=True, text=True, timeout=180)
        if done.returncode != 0:
            log = self.folder / "server.log"
            raise RuntimeError(f"{program} failed ({done.returncode}): {done.stderr[-2000:]}"
                               f"{log.read_text()[-2000:] if log.exists() else ''}")
