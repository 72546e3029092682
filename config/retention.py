"""The retention sweep: the bytes nothing uses any more go — a deleted session's attachments,
library files and workspace (deleted with the session; the sweep finds what a crash left),
files no row names, avatars no role shows, and import uploads left waiting past
PARLEY_IMPORT_UPLOAD_HOURS. A file younger than an hour is never touched (its row may not be
committed yet).

One of the workers runs it every PARLEY_RETENTION_SWEEP_MINUTES; `python -m config.retention`
runs it now (before a backup, say) and prints what went.
"""

from __future__ import annotations

import logging
import os
import sys
import threading

logger = logging.getLogger(__name__)
LOOK_SECONDS = 60.0  # how often a worker asks whether the sweep is due


def sweep() -> dict[str, int]:
    """Run every app's part of the sweep; what each removed."""
    from apps.chat.records.retention import chat_files_sweep, workspaces_sweep
    from apps.imports.services import import_files_sweep, uploads_expire
    from apps.roles.services import avatars_sweep

    return {
        "import uploads expired": uploads_expire(),
        "import files no job names": import_files_sweep(),
        "chat files of deleted sessions or no row": chat_files_sweep(),
        "workspace folders of deleted sessions": workspaces_sweep(),
        "avatars no role shows": avatars_sweep(),
    }


def _due(minutes: int) -> bool:
    """Whether this worker runs this interval's sweep: one among all the workers."""
    import redis

    from apps.chat.livestate import PREFIX, shared_sync_client

    try:
        return bool(
            shared_sync_client().set(f"{PREFIX}:retention-sweep", "1", nx=True, ex=minutes * 60)
        )
    except redis.RedisError:
        return False  # nothing is lost by sweeping later


def retention_sweeps(stop: threading.Event, minutes: int) -> None:
    """A worker's thread: the sweep, when it is this worker's turn, until `stop`."""
    from django.db import close_old_connections

    while not stop.wait(LOOK_SECONDS):
        if not _due(minutes):
            continue
        try:
            removed = sweep()
        except Exception:  # a storage or database hiccup: the next interval tries again
            logger.exception("The retention sweep failed")
            continue
        finally:
            close_old_connections()
        if any(removed.values()):
            logger.info(
                "Retention sweep: %s", ", ".join(f"{n} {what}" for what, n in removed.items())
            )


def main() -> int:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    import django

    django.setup()
    for what, count in sweep().items():
        print(f"{count:6d}  {what}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
