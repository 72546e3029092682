"""The `parley` command: `parley chat`, `parley ask`, `parley import`, `parley login`."""

from __future__ import annotations

import argparse
import asyncio
import sys
from pathlib import Path

from parley_cli import config
from parley_cli.client import Api, ApiError


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="parley", description="The council from a terminal.")
    commands = parser.add_subparsers(dest="command", required=True)
    chat = commands.add_parser("chat", help="a live transcript to talk to the council in")
    chat.add_argument("--session", help="the session's name (else you choose)")
    chat.add_argument("--thread", help="a thread's id (else the session's current one)")
    ask = commands.add_parser("ask", help="send one message, print the turn's replies, exit")
    ask.add_argument("text")
    ask.add_argument("--session", required=True, help="the session's name")
    ask.add_argument("--thread", help="a thread's id (else the session's current one)")
    ask.add_argument(
        "--attach", action="append", type=Path, default=[], metavar="FILE",
        help="an image, PDF or text file to send with it (repeat for more)",
    )  # fmt: skip
    ask.add_argument("--json", action="store_true", help="the replies as JSON")
    ask.add_argument("--timeout", type=float, default=600, help="seconds to wait (600)")
    imports = commands.add_parser(
        "import",
        help="import conversations: an export of another chat app, or of Parley (the "
        "server's Import page lists the kinds it reads)",
    )
    imports.add_argument("file", type=Path)
    imports.add_argument("--yes", action="store_true", help="import without asking")
    imports.add_argument(
        "--role", action="append", default=[], metavar="NAME=HANDLE",
        help="the role a model's replies go to (a handle, or new); repeat for each",
    )  # fmt: skip
    library = commands.add_parser(
        "library", help="a session's library: add documents, list them, search them"
    )
    library.add_argument("action", choices=["add", "list", "search"])
    library.add_argument("items", nargs="*", metavar="FILE|WORDS",
                         help="add: the files; search: the question")  # fmt: skip
    library.add_argument("--session", required=True, help="the session's name")
    login = commands.add_parser("login", help="save the server's address and your token")
    login.add_argument("--url", required=True, help="e.g. http://localhost:8000")
    login.add_argument("--token", required=True, help="pat_… (account menu → API tokens)")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.command == "login":
        path = config.save(config.Config(url=args.url.rstrip("/"), token=args.token))
        print(f"Saved to {path}.")
        return 0
    try:
        settings = config.load()
    except config.ConfigError as exc:
        print(exc, file=sys.stderr)
        return 2
    if args.command == "ask":
        return asyncio.run(_ask(settings, args))
    if args.command == "import":
        return asyncio.run(_import(settings, args))
    if args.command == "library":
        return asyncio.run(_library(settings, args))
    from parley_cli.tui import ParleyChat

    app = ParleyChat(Api(settings), session=args.session, thread=args.thread)
    app.run()
    if app.return_code:
        return app.return_code
    return 0


async def _library(settings: config.Config, args) -> int:
    from parley_cli.library import add, search, show

    api = Api(settings)
    try:
        if args.action == "add":
            if not args.items:
                print("Name one or more files to add.", file=sys.stderr)
                return 2
            return await add(api, args.session, [Path(item) for item in args.items])
        if args.action == "search":
            if not args.items:
                print("Say what to look for.", file=sys.stderr)
                return 2
            return await search(api, args.session, " ".join(args.items))
        return await show(api, args.session)
    except ApiError as exc:
        print(exc.detail or f"The server answered {exc.status}.", file=sys.stderr)
        return 1
    finally:
        await api.close()


async def _ask(settings: config.Config, args) -> int:
    from parley_cli.ask import ask, print_replies

    api = Api(settings)
    try:
        replies = await ask(
            api, args.text, session=args.session, thread=args.thread, timeout=args.timeout,
            attach=args.attach,
        )  # fmt: skip
    except ApiError as exc:
        where = f" ({exc.field})" if exc.field else ""
        print(f"Parley refused{where}: {exc.detail}", file=sys.stderr)
        return 2
    except TimeoutError:
        print(f"No answer within {args.timeout:g} s.", file=sys.stderr)
        return 1
    finally:
        await api.close()
    return print_replies(replies, as_json=args.json)


async def _import(settings: config.Config, args) -> int:
    from parley_cli.importing import run_import

    roles = dict(pick.split("=", 1) for pick in args.role if "=" in pick)
    api = Api(settings)
    try:
        return await run_import(api, args.file, roles=roles, yes=args.yes)
    except ApiError as exc:
        where = f" ({exc.field})" if exc.field else ""
        print(f"Parley refused{where}: {exc.detail}", file=sys.stderr)
        return 2
    finally:
        await api.close()


if __name__ == "__main__":
    sys.exit(main())
