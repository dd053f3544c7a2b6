"""A Postgres primary and a streaming hot standby of it, for the tests and the benchmarks.

Built with the binaries ``pgserver`` ships (``initdb``, ``pg_ctl``, ``pg_basebackup``), so it
runs on a machine with Python only. Postgres refuses to run as root: as root, the servers run
as the system user ``pgserver`` (the one ``pgserver`` itself creates and uses), their
directories owned by it. Both listen on loopback TCP ports chosen here; ``trust`` auth.

``with PrimaryAndStandby() as cluster:`` gives ``cluster.primary_url``/``standby_url`` (database
``postgres``), :meth:`PrimaryAndStandby.wait_replayed` (the standby has replayed everything the
primary has written so far) and :meth:`PrimaryAndStandby.standby_pid` (the CPU benchmark).
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path
from types import TracebackType
from typing import Any

import psycopg

__all__ = ["PrimaryAndStandby", "bin_dir"]


def bin_dir() -> Path:
    """The directory of the Postgres binaries ``pgserver`` ships."""
    import pgserver

    return Path(pgserver.__file__).parent / "pginstall" / "bin"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class PrimaryAndStandby:
    """A primary and a hot standby streaming from it (``pg_basebackup -R``), in a temporary
    directory removed on exit. ``settings``: extra ``postgresql.conf`` lines of both."""

    def __init__(self, settings: dict[str, str] | None = None) -> None:
        self.settings = settings or {}
        self.root = Path(tempfile.mkdtemp(prefix="debounce-standby-"))
        self.primary_port = _free_port()
        self.standby_port = _free_port()
        self.user: str | None = None
        if os.geteuid() == 0:
            from pgserver.utils import ensure_prefix_permissions, ensure_user_exists

            self.user = "pgserver"
            ensure_user_exists(self.user)
            ensure_prefix_permissions(self.root)
            self.root.chmod(0o755)
            shutil.chown(self.root, self.user)

    @property
    def primary_url(self) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.primary_port}/postgres"

    @property
    def standby_url(self) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.standby_port}/postgres"

    def _run(self, name: str, *args: str) -> None:
        kwargs: dict[str, Any] = {"user": self.user} if self.user else {}
        done = subprocess.run(
            [str(bin_dir() / name), *args],
            capture_output=True,
            text=True,
            cwd=self.root,
            check=False,
            **kwargs,
        )
        if done.returncode != 0:
            raise RuntimeError(f"{name} {' '.join(args)}: {done.stderr.strip()[-2000:]}")

    def _conf(self, data: Path, port: int) -> None:
        lines = {
            "port": str(port),
            "listen_addresses": "'127.0.0.1'",
            "unix_socket_directories": f"'{self.root}'",
            "wal_level": "replica",
            "max_wal_senders": "5",
            "hot_standby": "on",
            "fsync": "off",
            "synchronous_commit": "on",
            "full_page_writes": "off",
            "wal_receiver_status_interval": "1s",
            **self.settings,
        }
        with open(data / "postgresql.conf", "a") as f:
            f.writelines(f"{k} = {v}\n" for k, v in lines.items())

    def start(self) -> PrimaryAndStandby:
        primary, standby = self.root / "primary", self.root / "standby"
        self._run("initdb", "-D", str(primary), "-U", "postgres", "--auth=trust", "-E", "UTF8", "--no-sync")
        self._conf(primary, self.primary_port)
        self._run("pg_ctl", "-D", str(primary), "-l", str(self.root / "primary.log"), "-w", "start")
        self._run(
            "pg_basebackup",
            "-D",
            str(standby),
            "-R",
            "-X",
            "stream",
            "-c",
            "fast",
            "-h",
            "127.0.0.1",
            "-p",
            str(self.primary_port),
            "-U",
            "postgres",
        )
        self._conf(standby, self.standby_port)
        self._run("pg_ctl", "-D", str(standby), "-l", str(self.root / "standby.log"), "-w", "start")
        self.wait_replayed()
        return self

    def wait_replayed(self, timeout: float = 60.0) -> None:
        """Return once the standby has replayed everything the primary wrote before the call
        (polls its replay position).

        Raises:
            TimeoutError: not within ``timeout`` seconds.
        """
        with psycopg.connect(self.primary_url, autocommit=True) as p:
            row = p.execute("select pg_current_wal_lsn()::text").fetchone()
        assert row is not None
        deadline = time.monotonic() + timeout
        with psycopg.connect(self.standby_url, autocommit=True) as s:
            while True:
                done = s.execute(
                    "select pg_is_in_recovery() and pg_last_wal_replay_lsn() >= %s::pg_lsn", (row[0],)
                ).fetchone()
                if done == (True,):
                    return
                if time.monotonic() > deadline:
                    raise TimeoutError("the standby did not replay the primary's WAL")
                time.sleep(0.01)

    def standby_pid(self) -> int:
        """The standby postmaster's process id."""
        return int((self.root / "standby" / "postmaster.pid").read_text().split()[0])

    def primary_pid(self) -> int:
        """The primary postmaster's process id."""
        return int((self.root / "primary" / "postmaster.pid").read_text().split()[0])

    def stop(self) -> None:
        for name in ("standby", "primary"):
            if (self.root / name / "postmaster.pid").exists():
                try:
                    self._run("pg_ctl", "-D", str(self.root / name), "-m", "immediate", "-w", "stop")
                except RuntimeError:
                    pass
        shutil.rmtree(self.root, ignore_errors=True)

    def __enter__(self) -> PrimaryAndStandby:
        try:
            return self.start()
        except BaseException:
            self.stop()
            raise

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()
