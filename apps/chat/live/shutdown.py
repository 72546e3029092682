"""A stopping web process asks every tab it serves to reconnect at once, so the tabs reach a
process that is running and catch up exactly, instead of waiting out the browser's backoff
after a dropped socket."""

from __future__ import annotations

import asyncio
import logging
import sys
import weakref
from typing import Any

logger = logging.getLogger(__name__)
# Parley's own "reconnect and catch up" (daphne can only send 1000 or 3000-4999, so not the
# standard 1012 "service restart"); the page's script reconnects on it.
CLOSE_RECONNECT = 4012
# Every tab's socket connected to this process (the consumers add and discard themselves).
open_tabs: weakref.WeakSet[Any] = weakref.WeakSet()
# How long a stopping web process waits at most for its tabs to answer their close frames
# (a busy process sends them late), and how often it looks.
SHUTDOWN_FLUSH_SECONDS = 2.0
SHUTDOWN_LOOK_SECONDS = 0.02


class _Stopping:
    now = False  # set when the process starts stopping: a tab connecting then is sent on


stopping = _Stopping()


async def close_every_tab() -> int:
    """Ask every tab of this process to reconnect at once (it will reach a process that is
    running, and catch up exactly): a stopping server otherwise drops its sockets without a
    close frame, and browsers back off for seconds before they retry. Waits until the tabs
    have answered, or a little while: a tab that connected meanwhile (another process's tabs
    reconnecting during a rolling restart) is closed too."""
    stopping.now = True
    loop = asyncio.get_running_loop()
    deadline = loop.time() + SHUTDOWN_FLUSH_SECONDS
    asked: set[int] = set()
    while open_tabs and loop.time() < deadline:
        for tab in list(open_tabs):
            if id(tab) in asked:
                continue
            asked.add(id(tab))
            try:
                await tab.close(code=CLOSE_RECONNECT)
            except Exception:  # a socket closing meanwhile
                logger.debug("A tab's socket was already closing")
        await asyncio.sleep(SHUTDOWN_LOOK_SECONDS)
    return len(asked)


def close_tabs_on_shutdown() -> None:
    """Under daphne, close every tab with the reconnect code when the server stops (SIGTERM,
    a deploy). Registered before daphne's own shutdown step, which cancels the consumers."""
    if "daphne.server" not in sys.modules or "twisted.internet.reactor" not in sys.modules:
        return  # another server, or none (tests, management commands)
    from twisted.internet import defer, reactor

    def before_shutdown():
        closing = asyncio.ensure_future(close_every_tab())
        closing.add_done_callback(
            lambda done: (
                logger.info("Closed %d tab(s) for the restart", done.result())
                if not done.cancelled() and done.exception() is None
                else None
            )
        )
        return defer.Deferred.fromFuture(closing)

    # (The interface declares its methods without self, which mypy misreads.)
    reactor.addSystemEventTrigger("before", "shutdown", before_shutdown)  # type: ignore[arg-type]
