"""A throwaway PostgreSQL server for the tests, from Debian's ``postgresql`` package.

:func:`postgres_server` runs ``initdb`` in a fresh folder under the system's temporary folder and starts the
server there, listening on a Unix socket in that folder only (no TCP port: parallel test workers never
collide), with ``trust`` authentication for its superuser ``postgres``; leaving it stops the server and
removes the folder. PostgreSQL refuses to run as root: under root the server runs as Debian's ``postgres``
user (the package creates it), which owns the folder.

pytest-postgresql was not used: it runs ``pg_ctl`` as the test's own user, so under root (CI) ``initdb``
refuses to start, and it would add a pytest plugin (and mirakuru, port-for) to every test run.
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import subprocess
import tempfile
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

SUPERUSER = "postgres"


def binaries() -> Path | None:
    """The newest Debian PostgreSQL's ``bin`` folder (``/usr/lib/postgresql/<major>/bin``), else one on PATH."""
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/pg_ctl"), key=lambda p: int(Path(p).parts[-3]))
    if found:
        return Path(found[-1]).parent
    on_path = shutil.which("pg_ctl")
    return Path(on_path).parent if on_path else None


@dataclass
class Server:
    folder: Path  # data/, the socket, the log
    bin: Path
    _run_as: dict

    @property
    def socket_dir(self) -> Path:
        return self.folder

    def url(self, database: str, driver: str = "psycopg") -> str:
        """The SQLAlchemy URL of ``database`` on this server (over its Unix socket)."""
        return f"postgresql+{driver}://{SUPERUSER}@/{database}?host={self.socket_dir}"

    def connect(self, database: str = "postgres"):
        """A psycopg connection to ``database`` (autocommit)."""
        import psycopg

        return psycopg.connect(host=str(self.socket_dir), user=SUPERUSER, dbname=database, autocommit=True)

    def create_database(self, name: str) -> str:
        """A new empty database; returns its SQLAlchemy URL."""
        with self.connect() as connection:
            connection.execute(f'CREATE DATABASE "{name}"')
        return self.url(name)

    def log(self) -> str:
        path = self.folder / "server.log"
        return path.read_text(errors="replace") if path.is_file() else ""

    def _pg(self, *args: str) -> None:
        ran = subprocess.run([str(self.bin / args[0]), *args[1:]], cwd=self.folder, capture_output=True, text=True,
                             timeout=120, **self._run_as)
        if ran.returncode != 0:
            raise RuntimeError(f"{' '.join(args[:2])} failed ({ran.returncode}):\n{ran.stdout}{ran.stderr}\n{self.log()}")


def _unprivileged() -> dict:
    """subprocess arguments that run a command as someone PostgreSQL accepts: the postgres user under root."""
    if os.geteuid() != 0:
        return {}
    try:
        user = pwd.getpwnam("postgres")
    except KeyError:
        raise RuntimeError("PostgreSQL refuses to run as root and there is no postgres user "
                           "(Debian's postgresql package creates it)") from None
    env = {"PATH": "/usr/bin:/bin", "HOME": user.pw_dir, "LANG": "C", "LC_ALL": "C"}
    return {"user": user.pw_uid, "group": user.pw_gid, "extra_groups": [], "env": env}


@contextmanager
def postgres_server() -> Iterator[Server]:
    """A running throwaway server; stopped, and its folder removed, on leaving."""
    bin_dir = binaries()
    if bin_dir is None:
        raise FileNotFoundError("no PostgreSQL server (pg_ctl): install Debian's postgresql package "
                                "(scripts/system-packages.sh test)")
    run_as = _unprivileged()
    # Not pytest's tmp_path: under root that is private to root. The socket path must stay short (107 bytes).
    folder = Path(tempfile.mkdtemp(prefix="pg-"))
    if run_as:
        os.chown(folder, run_as["user"], run_as["group"])
    server = Server(folder, bin_dir, run_as)
    started = False
    try:
        server._pg("initdb", "-D", str(folder / "data"), "-U", SUPERUSER, "--auth=trust", "--encoding=UTF8",
                   "--no-locale", "--no-sync")
        server._pg("pg_ctl", "start", "-w", "-t", "60", "-D", str(folder / "data"), "-l", str(folder / "server.log"),
                   "-o", f"-c listen_addresses='' -k {folder} -F")
        started = True
        yield server
    finally:
        if started:
            try:
                server._pg("pg_ctl", "stop", "-w", "-t", "60", "-m", "fast", "-D", str(folder / "data"))
            except (RuntimeError, subprocess.TimeoutExpired):
                server._pg("pg_ctl", "stop", "-w", "-m", "immediate", "-D", str(folder / "data"))
        shutil.rmtree(folder, ignore_errors=True)
