"""The web process: daphne's own command line (`python -m config.web -p 8000
config.asgi:application` takes every daphne option), with an access log that never prints a
secret in a path — an invite link's token."""

from __future__ import annotations

import asyncio
import sys

import uvloop

from config.logs import redact_paths

# daphne makes its event loop (and installs Twisted's reactor on it) when first imported: on
# libuv's loop, each push's turns of the loop cost less.
asyncio.set_event_loop_policy(uvloop.EventLoopPolicy())

from daphne import access, cli  # noqa: E402


class RedactingAccessLog(access.AccessLogGenerator):
    def write_entry(self, host, date, request, status=None, length=None, ident=None, user=None):
        super().write_entry(host, date, redact_paths(request), status, length, ident, user)


def main(argv: list[str] | None = None) -> None:
    cli.AccessLogGenerator = RedactingAccessLog  # the name the CLI builds its access log by
    cli.CommandLineInterface().run(sys.argv[1:] if argv is None else argv)


if __name__ == "__main__":
    main()
