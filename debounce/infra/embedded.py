"""An embedded Postgres for ``debounce serve`` when ``DATABASE_URL`` is unset.

Uses the ``pgserver`` package (Postgres binaries shipped in a wheel): the data directory lives
under ``DEBOUNCE_DATA_DIR`` (default ``.debounce/``) and survives restarts; the server listens
on a Unix socket in that directory only. ``debounce serve`` creates it; the commands a person
runs by hand use it once it exists (see ``debounce.cli.processes.database``).
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

__all__ = ["EmbeddedPostgres"]

log = logging.getLogger("debounce.embedded")


class EmbeddedPostgres:
    """Start (or reuse) the embedded server whose data lives in ``<data_dir>/pgdata``."""

    def __init__(self, data_dir: str | Path) -> None:
        self.data_dir = Path(data_dir).resolve() / "pgdata"
        self._server: Any = None

    def exists(self) -> bool:
        """A database was created here (by ``debounce serve``)."""
        return (self.data_dir / "PG_VERSION").is_file()

    def start(self, *, announce: bool = True) -> str:
        """Start the server; returns its connection URL. ``announce``: log where it is at
        INFO (else at DEBUG).

        Raises:
            RuntimeError: the server could not start (the log under the data dir says why).
        """
        import warnings

        with warnings.catch_warnings():
            # platformdirs warns when XDG_RUNTIME_DIR is unset (containers, CI): harmless here.
            warnings.simplefilter("ignore")
            import pgserver

        self.data_dir.mkdir(parents=True, exist_ok=True)
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                self._server = pgserver.get_server(str(self.data_dir), cleanup_mode="stop")
        except Exception as exc:  # pgserver raises plain exceptions with the pg_ctl output
            raise RuntimeError(f"embedded Postgres did not start in {self.data_dir}: {exc}") from exc
        url: str = self._server.get_uri()
        log.log(
            logging.INFO if announce else logging.DEBUG,
            "embedded Postgres: data in %s, url %s",
            self.data_dir,
            url,
        )
        return url

    def stop(self) -> None:
        """Stop the server (the data stays)."""
        if self._server is not None:
            self._server.cleanup()
            self._server = None
