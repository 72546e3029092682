"""SQLite with one writer at a time per process, queued on a lock rather than on SQLite's own.

SQLite lets one write transaction run at a time. A thread that finds the file locked sleeps
in SQLite's busy handler, in growing steps (up to 100 ms), and may sleep on while the lock is
already free: under a burst (a hundred composer POSTs, a worker settling many replies) those
naps add up to seconds. Here the threads of a process queue for a write transaction on a lock
that wakes the next one the moment the previous one commits; only another process's writer
(web against worker) still meets SQLite's busy handler.
"""

from __future__ import annotations

import threading

from django.db.backends.sqlite3 import base

_writer = threading.Lock()


class DatabaseWrapper(base.DatabaseWrapper):
    holds_writer = False

    def _start_transaction_under_autocommit(self) -> None:
        _writer.acquire()
        self.holds_writer = True
        try:
            super()._start_transaction_under_autocommit()  # type: ignore[misc]
        except BaseException:
            self._release_writer()
            raise

    def _release_writer(self) -> None:
        if self.holds_writer:
            self.holds_writer = False
            _writer.release()

    def _commit(self) -> None:
        try:
            super()._commit()  # type: ignore[misc]
        finally:
            self._release_writer()

    def _rollback(self) -> None:
        try:
            super()._rollback()  # type: ignore[misc]
        finally:
            self._release_writer()

    def _close(self) -> None:
        try:
            super()._close()  # type: ignore[misc]
        finally:
            self._release_writer()
