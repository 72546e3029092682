"""`parley chat`: a Textual app on a thread. Each reply streams in its own panel in its role's
colour; the roles of one stage answer side by side and the convergence role below them; a
status line says who is waiting, streaming, done or failed, the auto-rounds and the link's
state; the queue shows while a turn runs; `@` and `/` complete; Esc stops the replies."""

from __future__ import annotations

import asyncio
import shlex
from contextlib import suppress
from pathlib import Path

from rich.markdown import Markdown
from rich.markup import escape
from textual import on, work
from textual.app import App, ComposeResult
from textual.containers import Horizontal, VerticalScroll
from textual.css.query import NoMatches
from textual.screen import Screen
from textual.suggester import Suggester
from textual.widgets import Footer, Header, Input, OptionList, Static
from textual.widgets.option_list import Option

from parley_cli.ask import with_citations
from parley_cli.client import Api, ApiError, Reply, ThreadState, follow

IN_FLIGHT = {"queued", "streaming"}
MARKS = {"queued": "…", "streaming": "▍", "done": "", "error": " ✕", "interrupted": " ■"}


class HandleSuggester(Suggester):
    """`@` completes a role's handle (or `@all`) anywhere; `/` a command at the start."""

    def __init__(self) -> None:
        super().__init__(use_cache=False, case_sensitive=True)
        self.handles: list[str] = ["all"]
        self.commands: list[str] = []

    async def get_suggestion(self, value: str) -> str | None:
        if value.startswith("/") and " " not in value:
            match = next((c for c in self.commands if c.startswith(value[1:])), None)
            return f"/{match} " if match and value[1:] else None
        word = value.rsplit(" ", 1)[-1]
        if word.startswith("@") and len(word) > 1:
            match = next((h for h in self.handles if h.startswith(word[1:])), None)
            if match and match != word[1:]:
                return value[: len(value) - len(word)] + f"@{match} "
        return None


class MessagePanel(Static):
    """One message: a bordered panel titled with its speaker, in its role's colour."""

    DEFAULT_CSS = """
    MessagePanel { border: round $secondary; padding: 0 1; height: auto; width: 1fr; }
    MessagePanel.user { border: round $primary; }
    MessagePanel.notice { border: none; color: $text-muted; }
    """

    def __init__(self, reply: Reply) -> None:
        super().__init__(markup=False, classes=self._kind(reply))
        self.reply = reply
        self.refresh_from()

    @staticmethod
    def _kind(reply: Reply) -> str:
        if reply.data["speaker"] == "user":
            return "user"
        return "notice" if reply.data["kind"] == "notice" else "role"

    def refresh_from(self) -> None:
        data = self.reply.data
        status = data["status"]
        self.border_title = escape(data["speaker_name"]) + MARKS.get(status, "")
        if data.get("colour"):
            self.styles.border = ("round", data["colour"])
        if not self.reply.text:
            self.update("waiting…" if status == "queued" else "")
        elif data["speaker"] == "user":
            self.update(self.reply.text)
        else:  # a role's Markdown, as the web page renders it (rich never runs HTML)
            self.update(Markdown(with_citations(self.reply.text, data.get("citations") or [])))


class Picker(Screen[str]):
    """Choose one of a list (a session, then one of its threads) with the arrows and Enter."""

    def __init__(self, title: str, choices: list[tuple[str, str]]) -> None:
        super().__init__()
        self.title_text, self.choices = title, choices

    def compose(self) -> ComposeResult:
        yield Static(self.title_text, id="picker-title")
        yield OptionList(*(Option(label, id=value) for value, label in self.choices))

    @on(OptionList.OptionSelected)
    def chosen(self, event: OptionList.OptionSelected) -> None:
        self.dismiss(event.option.id)


class ParleyChat(App):
    """The transcript, the status line, the queue and the composer of one thread."""

    TITLE = "Parley"
    CSS = """
    #status { height: 1; background: $boost; padding: 0 1; }
    #queue { height: auto; color: $text-muted; padding: 0 1; display: none; }
    #queue.shown { display: block; }
    #transcript { height: 1fr; }
    .stage { height: auto; }
    #composer { dock: bottom; }
    """
    BINDINGS = [("escape", "stop", "Stop the replies"), ("ctrl+q", "quit", "Quit")]

    def __init__(self, api: Api, *, session: str | None = None, thread: str | None = None):
        super().__init__()
        self.api, self.session_name, self.thread_id = api, session, thread
        self.state = ThreadState()
        self.panels: dict[str, MessagePanel] = {}
        self.suggester = HandleSuggester()
        self.link = "connecting…"
        self.rounds = ""
        self.session: dict = {}
        self.row: Horizontal | None = None  # the parallel stage panels are added to
        self.attached: list[dict] = []  # uploaded by /attach, sent with the next message

    def compose(self) -> ComposeResult:
        yield Header()
        yield Static("", id="status")
        yield VerticalScroll(id="transcript")
        yield Static("", id="queue")
        yield Input(
            placeholder="Message the council: @handle a role, / a command, /attach FILE, Esc: stop",
            suggester=self.suggester,
            id="composer",
        )
        yield Footer()

    async def on_mount(self) -> None:
        try:
            sessions = await self.api.sessions()
        except ApiError as exc:
            self.exit(message=f"Parley refused: {exc.detail}")
            return
        if self.session_name:
            match = [s for s in sessions if s["name"].lower() == self.session_name.lower()]
            if not match:
                self.exit(message=f"No session named {self.session_name!r}.")
                return
            await self.open_session(match[0]["id"])
        elif len(sessions) == 1:
            await self.open_session(sessions[0]["id"])
        else:
            choices = [(s["id"], f"{s['name']}  ({s['access']})") for s in sessions]
            self.push_screen(Picker("Choose a session (Enter):", choices), self._picked)

    async def _picked(self, session_id: str | None) -> None:
        """A session chosen here: then one of its threads, when it has more than one."""
        if not session_id:
            return
        threads = await self.api.threads(session_id)
        if len(threads) < 2 or self.thread_id:
            await self.open_session(session_id)
            return

        async def thread_picked(thread_id: str | None) -> None:
            self.thread_id = thread_id
            await self.open_session(session_id)

        choices = [(t["id"], f"{t['label'] or 'Untitled chat'}  ({t['latest_seq']} messages)")
                   for t in threads]  # fmt: skip
        self.push_screen(Picker("Choose a thread (Enter):", choices), thread_picked)

    async def open_session(self, session_id: str) -> None:
        self.session = await self.api.session(session_id)
        self.sub_title = self.session["name"]
        self.thread_id = self.thread_id or self.session["active_thread"]
        self.suggester.handles = ["all", *(r["handle"] for r in self.session["roles"])]
        self.suggester.commands = [c["name"] for c in self.session["commands"]] + ["attach"]
        for message in await self.api.messages(self.thread_id):
            self.show(self.state.know(message))
        self.query_one("#composer", Input).focus()
        self.listen()
        await self.refresh_thread()

    # --- the transcript ------------------------------------------------------------------

    def show(self, reply: Reply) -> None:
        """Add or refresh a message's panel; the roles of one parallel stage share a row."""
        panel = self.panels.get(reply.id)
        if panel is not None:
            transcript = self.query_one("#transcript", VerticalScroll)
            following = transcript.scroll_y >= transcript.max_scroll_y - 1
            panel.reply = reply
            panel.refresh_from()
            if following:  # the reader is at the bottom: stay with the newest text
                self.call_after_refresh(transcript.scroll_end, animate=False)
        else:
            panel = self.panels[reply.id] = MessagePanel(reply)
            transcript = self.query_one("#transcript", VerticalScroll)
            if reply.data.get("stage") == "parallel" and reply.data["speaker"] != "user":
                if self.row is not None:
                    self.row.mount(panel)
                    self.call_after_refresh(self._order_row, self.row)
                else:
                    self.row = Horizontal(panel, classes="stage parallel")
                    transcript.mount(self.row)
            else:
                self.row = None
                transcript.mount(panel)
            self.call_after_refresh(transcript.scroll_end, animate=False)
        self.update_status()

    @staticmethod
    def _order_row(row: Horizontal) -> None:
        """Side by side in transcript order (replies can be announced in any order)."""
        row.sort_children(
            key=lambda panel: panel.reply.data["seq"] if isinstance(panel, MessagePanel) else 0
        )

    def update_status(self) -> None:
        counts = {"waiting": 0, "streaming": 0, "done": 0, "failed": 0}
        turn: list[Reply] = []
        for reply in sorted(self.state.messages.values(), key=lambda r: r.data["seq"]):
            turn = [] if reply.data["speaker"] == "user" else [*turn, reply]
        for reply in turn:
            status = reply.status
            key = {"queued": "waiting", "streaming": "streaming", "done": "done"}.get(
                status, "failed"
            )
            counts[key] += 1
        parts = [f"{n} {label}" for label, n in counts.items() if n]
        budget = self.session.get("turn_token_budget") or 0
        limit = f"budget {budget:,} tokens a turn" if budget else ""
        line = " · ".join(part for part in [*parts, self.rounds, limit, self.link] if part)
        with suppress(NoMatches):  # the app is closing: an answer came after its screen went
            self.query_one("#status", Static).update(line)

    @work(exclusive=True, group="status")
    async def refresh_thread_soon(self) -> None:
        """`refresh_thread` without waiting for it (the newest call wins)."""
        await self.refresh_thread()

    async def refresh_thread(self) -> None:
        """The queue and the auto-rounds, as the server has them now."""
        if not self.thread_id:
            return
        try:
            status = await self.api.thread(self.thread_id)
        except ApiError:
            return
        rounds = status["rounds"]
        self.rounds = f"round {rounds['round']}/{rounds['rounds']}" if rounds else ""
        try:
            queue = self.query_one("#queue", Static)
        except NoMatches:
            return  # the app closed while the server answered

        items = status["queue"]
        queue.set_class(bool(items), "shown")
        queue.update(
            "Queued: " + " | ".join(escape(i["text"] or "(a whisper)")[:60] for i in items)
        )
        self.update_status()

    # --- the live stream -----------------------------------------------------------------

    def set_link(self, text: str) -> None:
        self.link = "live" if text == "connected" else text
        self.update_status()

    @work(exclusive=True, group="stream")
    async def listen(self) -> None:
        assert self.thread_id
        try:
            async for kind, data in follow(self.api, self.thread_id, on_state=self.set_link):
                reply = self.state.apply(kind, data)
                if kind == "snapshot":
                    for item in self.state.messages.values():
                        self.show(item)
                elif reply is not None:
                    self.show(reply)
                    if kind == "message":
                        self.refresh_thread_soon()
        except ApiError as exc:  # a revoked token, a room left: say so, keep the transcript
            self.set_link(f"refused: {exc.detail}")
            self.notify(exc.detail, severity="error", timeout=10)

    # --- the composer --------------------------------------------------------------------

    @on(Input.Submitted, "#composer")
    async def send(self, event: Input.Submitted) -> None:
        text = event.value.strip()
        if not text or not self.thread_id:
            return
        if text.split(" ", 1)[0] == "/attach":
            if await self.attach(text.removeprefix("/attach").strip()):
                event.input.value = ""
            return
        try:
            posted = await self.api.post(self.thread_id, text, [a["id"] for a in self.attached])
        except ApiError as exc:
            self.notify(exc.detail, severity="error", timeout=6)
            return  # the text stays in the composer
        event.input.value = ""
        self.attached = []
        made = [posted["message"], *posted["replies"], *posted["notices"]]
        for message in sorted(filter(None, made), key=lambda m: m["seq"]):
            self.show(self.state.know(message))
        if posted["queued"]:
            await self.refresh_thread()
        if posted["thread"] != self.thread_id:  # a command opened another thread
            self.thread_id = posted["thread"]
            await self.reopen()

    async def attach(self, paths: str) -> bool:
        """`/attach FILE …` uploads files to go with the next message; `/attach` alone lists
        them, `/attach clear` drops them. Whether the composer may be cleared."""
        assert self.thread_id
        if paths == "clear":
            self.attached = []
            self.notify("No attachments now.")
            return True
        if not paths:
            names = ", ".join(a["name"] for a in self.attached) or "none"
            self.notify(f"Waiting for your next message: {names}. /attach FILE … adds more.")
            return True
        try:
            files = [Path(part).expanduser() for part in shlex.split(paths)]
            added = await self.api.attach(self.thread_id, files)
        except (ApiError, ValueError) as exc:
            self.notify(getattr(exc, "detail", str(exc)), severity="error", timeout=8)
            return False  # the command stays in the composer, to fix
        self.attached += added
        names = ", ".join(f"{a['name']} ({a['size']:,} bytes)" for a in added)
        self.notify(f"Attached {names}: sent with your next message.")
        return True

    async def reopen(self) -> None:
        assert self.thread_id
        self.state = ThreadState()
        self.panels, self.row = {}, None
        await self.query_one("#transcript", VerticalScroll).remove_children()
        for message in await self.api.messages(self.thread_id):
            self.show(self.state.know(message))
        self.listen()
        await self.refresh_thread()

    async def action_stop(self) -> None:
        if not self.thread_id:
            return
        try:
            await self.api.stop(self.thread_id)
            self.notify("Stopped the replies (what they wrote is kept).")
        except ApiError as exc:
            self.notify(exc.detail, severity="error")

    async def on_unmount(self) -> None:
        await asyncio.shield(self.api.close())
