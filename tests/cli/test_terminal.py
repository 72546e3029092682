"""The terminal client (issue 25, item 3), headless against a real daphne, worker and the
demo provider: `parley ask` prints a turn's replies; `parley chat` (Textual's pilot) streams
a fan-out side by side, shows what the web posts live, posts what the web then shows, stops
with Esc, and catches up exactly after a network blip."""

from __future__ import annotations

import asyncio
import json

import pytest
from django.db import connection
from django.test import Client
from django.urls import reverse
from textual.containers import Horizontal
from textual.widgets import Static

from apps.api.tokens import token_create
from apps.chat.models import Message, MessageStatus
from parley_cli.client import Api, ThreadState, follow
from parley_cli.config import Config
from parley_cli.main import main
from parley_cli.tui import MessagePanel, ParleyChat
from tests.conftest import wait_settled

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def config(alice, asgi_server, monkeypatch):
    raw = token_create(user=alice, name="terminal", scope="post")[1]
    monkeypatch.setenv("PARLEY_URL", asgi_server.url)
    monkeypatch.setenv("PARLEY_TOKEN", raw)
    monkeypatch.setenv("PARLEY_CONFIG", "/nonexistent/parley.json")
    return Config(url=asgi_server.url, token=raw)


def in_own_thread(function, *args, **kwargs):
    """Run Django work from an asyncio worker thread and give its database connection back
    (on PostgreSQL a pooled connection left in a finished thread is lost to the pool)."""

    def run():
        try:
            return function(*args, **kwargs)
        finally:
            connection.close()

    return asyncio.to_thread(run)


def replies_of(thread) -> list[Message]:
    return list(Message.objects.filter(thread=thread).exclude(speaker="user").order_by("seq"))


def test_parley_ask_prints_the_turns_replies(alice_thread, config, fast_demo, capsys):
    name = alice_thread.session.name
    assert main(["ask", "@director @sound_designer how should it open?", "--session", name]) == 0
    out = capsys.readouterr().out
    sound, director = replies_of(alice_thread)
    assert out.index("── Sound Designer ──") < out.index("── Director ──")
    assert sound.text in out and director.text in out and sound.text and director.text
    assert main(["ask", "@assistant and the ending?", "--session", name, "--json"]) == 0
    (printed,) = json.loads(capsys.readouterr().out)
    assert printed["speaker"] == "assistant" and printed["status"] == "done"
    assert printed["text"] == replies_of(alice_thread)[-1].text
    assert main(["ask", "hi", "--session", "No such session"]) == 2
    assert "No session named" in capsys.readouterr().err


def test_parley_ask_without_a_token_says_what_to_do(monkeypatch, capsys):
    for name in ("PARLEY_URL", "PARLEY_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("PARLEY_CONFIG", "/nonexistent/parley.json")
    assert main(["ask", "hi", "--session", "x"]) == 2
    assert "PARLEY_TOKEN" in capsys.readouterr().err


async def wait_for(condition, *, timeout: float = 20) -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while not condition():
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError("not within the time")
        await asyncio.sleep(0.05)


def test_a_fan_out_streams_side_by_side_and_the_web_and_terminal_see_each_other(
    alice, alice_thread, config, fast_demo
):
    web = Client()
    web.force_login(alice)
    post_url = reverse("chat:message_create", kwargs={"thread": alice_thread.public_id})
    seen: dict = {}

    async def scenario() -> None:
        app = ParleyChat(Api(config), session=alice_thread.session.name)
        async with app.run_test(size=(200, 60)) as pilot:
            await wait_for(lambda: "live" in app.link)
            await pilot.click("#composer")
            await pilot.press(*"@all how should the harbour scene open?")
            await pilot.press("enter")
            await wait_for(lambda: len(app.panels) == 7)  # the message and six replies
            await wait_for(
                lambda: all(p.reply.status == "done" for p in app.panels.values()), timeout=30
            )
            rows = [row for row in app.query(Horizontal) if row.has_class("parallel")]
            seen["row"] = [panel.reply.data["speaker"] for panel in rows[-1].query(MessagePanel)]
            seen["texts"] = {p.reply.data["speaker"]: p.reply.text for p in app.panels.values()}
            # The web posts; the terminal shows it and the reply live.
            await in_own_thread(
                web.post, post_url, {"text": "@assistant from the browser"}, HTTP_HX_REQUEST="true"
            )
            await wait_for(lambda: any(
                p.reply.text == "@assistant from the browser" for p in app.panels.values()
            ))  # fmt: skip
            await wait_for(lambda: len(app.panels) == 9)
            await wait_for(lambda: all(p.reply.status == "done" for p in app.panels.values()))
            seen["status"] = str(app.query_one("#status").render())

    asyncio.run(scenario())
    # The five parallel roles side by side in transcript order; the director below them.
    parallel = [m.speaker for m in replies_of(alice_thread)[:6] if m.speaker != "director"]
    assert seen["row"] == parallel and len(parallel) == 5
    replies = {m.speaker: m.text for m in replies_of(alice_thread)[:6]}
    assert {k: v for k, v in seen["texts"].items() if k != "user"} == replies
    assert "2 done" in seen["status"] or "1 done" in seen["status"]
    # What the terminal posted, the web page shows.
    page = web.get(reverse("chat:thread_detail", kwargs={"thread": alice_thread.public_id}))
    assert "how should the harbour scene open?" in page.content.decode()


def test_esc_stops_the_replies(alice, alice_thread, config, slow_demo):
    async def scenario() -> None:
        app = ParleyChat(Api(config), session=alice_thread.session.name)
        async with app.run_test(size=(160, 50)) as pilot:
            await wait_for(lambda: "live" in app.link)
            await pilot.click("#composer")
            await pilot.press(*"@director a long story please", "enter")
            await wait_for(
                lambda: any(p.reply.status == "streaming" and p.reply.text
                            for p in app.panels.values())
            )  # fmt: skip
            assert "1 streaming" in str(app.screen.query_one("#status", Static).content)
            await pilot.press("escape")
            await wait_for(lambda: any(p.reply.status == "interrupted"
                                       for p in app.panels.values()))  # fmt: skip

    asyncio.run(scenario())
    (reply,) = replies_of(alice_thread)
    assert reply.status == MessageStatus.INTERRUPTED


class Blip:
    """A TCP proxy in front of daphne whose connections can be cut (a network blip)."""

    def __init__(self, port: int) -> None:
        self.port, self.writers, self.server = port, [], None

    async def start(self) -> int:
        async def pipe(reader, writer):
            try:
                while data := await reader.read(65536):
                    writer.write(data)
                    await writer.drain()
            except (ConnectionError, asyncio.CancelledError):
                pass
            finally:
                writer.close()

        async def handle(client_reader, client_writer):
            server_reader, server_writer = await asyncio.open_connection("127.0.0.1", self.port)
            self.writers += [client_writer, server_writer]
            await asyncio.gather(
                pipe(client_reader, server_writer), pipe(server_reader, client_writer)
            )

        self.server = await asyncio.start_server(handle, "127.0.0.1", 0)
        return self.server.sockets[0].getsockname()[1]

    def cut(self) -> None:
        for writer in self.writers:
            writer.transport.abort()
        self.writers = []


def test_after_a_network_blip_the_client_catches_up_exactly(
    alice, alice_thread, asgi_server, config, slow_demo
):
    from apps.chat.council.posting import message_post

    result: dict = {}

    async def scenario() -> None:
        blip = Blip(asgi_server.port)
        port = await blip.start()
        api = Api(Config(url=f"http://127.0.0.1:{port}", token=config.token))
        state, links = ThreadState(), []
        stream = follow(api, str(alice_thread.public_id), on_state=links.append)
        async for kind, data in stream:
            state.apply(kind, data)
            if kind == "snapshot":
                break
        posted = await in_own_thread(
            message_post, thread=alice_thread, author=alice, text="@director a story"
        )
        reply_id = str(posted.replies[0].public_id)
        cut = False
        async for kind, data in stream:
            reply = state.apply(kind, data)
            if not cut and reply is not None and reply.id == reply_id and reply.seq >= 5:
                blip.cut()  # mid-reply
                cut = True
            if reply is not None and reply.id == reply_id and reply.status == "done":
                break
        await stream.aclose()
        await api.close()
        result.update(text=state.messages[reply_id].text, links=links, cut=cut)

    asyncio.run(scenario())
    (reply,) = wait_settled(replies_of(alice_thread))
    assert result["cut"] and any(link.startswith("reconnecting") for link in result["links"])
    assert result["links"].count("connected") >= 2
    assert result["text"] == reply.text and reply.text


def test_without_a_session_you_pick_one_and_then_its_thread(alice, alice_thread, config):
    from apps.chat.records.sessions import session_create
    from apps.chat.records.threads import thread_create

    session_create(owner=alice, name="Another film")
    older = alice_thread
    newer = thread_create(session=alice_thread.session)
    chosen: dict = {}

    async def scenario() -> None:
        app = ParleyChat(Api(config))
        async with app.run_test(size=(120, 40)) as pilot:
            await wait_for(
                lambda: "Choose a session" in str(app.screen.query_one("#picker-title").render())
            )
            options = app.screen.query_one("OptionList")
            labels = [
                str(options.get_option_at_index(i).prompt) for i in range(options.option_count)
            ]
            name = older.session.name
            index = next(i for i, label in enumerate(labels) if label.startswith(name))
            for _ in range(index):
                await pilot.press("down")
            await pilot.press("enter")
            await wait_for(
                lambda: "Choose a thread" in str(app.screen.query_one("#picker-title").render())
            )
            await pilot.press("down", "enter")  # the second: the threads come newest first
            await wait_for(lambda: "live" in app.link)
            chosen["thread"] = app.thread_id

    asyncio.run(scenario())
    assert chosen["thread"] == str(older.public_id) != str(newer.public_id)


def test_parley_ask_attaches_files_and_says_why_it_cannot(
    alice_thread, config, fast_demo, capsys, tmp_path
):
    from apps.chat.models import Attachment
    from tests.attachments.test_sniff import image_bytes, text_pdf

    chart, report = tmp_path / "chart.png", tmp_path / "report.pdf"
    chart.write_bytes(image_bytes("PNG", size=(30, 20)))
    report.write_bytes(text_pdf("Ship on Friday"))
    name = alice_thread.session.name
    argv = ["ask", "@assistant what do these say?", "--session", name]
    assert main([*argv, "--attach", str(chart), "--attach", str(report)]) == 0
    sent = Message.objects.get(thread=alice_thread, speaker="user")
    assert [a.name for a in sent.attachments.order_by("position")] == ["chart.png", "report.pdf"]
    assert "── Assistant ──" in capsys.readouterr().out
    (tmp_path / "logo.svg").write_text("<svg onload='x()'/>")
    assert main([*argv, "--attach", str(tmp_path / "logo.svg")]) == 2
    assert "export it as PNG" in capsys.readouterr().err
    assert main([*argv, "--attach", str(tmp_path / "missing.png")]) == 2
    assert "Cannot read" in capsys.readouterr().err
    assert Message.objects.filter(thread=alice_thread, speaker="user").count() == 1
    assert Attachment.objects.count() == 2  # nothing refused was kept


def test_slash_attach_in_the_chat_sends_files_with_the_next_message(
    alice_thread, config, fast_demo, tmp_path
):
    notes = tmp_path / "my notes.md"
    notes.write_text("# Plan\nbuy milk\n")

    async def scenario() -> None:
        app = ParleyChat(Api(config), session=alice_thread.session.name)
        async with app.run_test(size=(160, 50)) as pilot:
            await wait_for(lambda: "live" in app.link)
            await pilot.click("#composer")
            await pilot.press(*f"/attach '{notes}'", "enter")
            await wait_for(lambda: app.attached)
            assert app.query_one("#composer").value == ""
            await pilot.press(*"@assistant read my notes", "enter")
            await wait_for(lambda: not app.attached and app.query_one("#composer").value == "")
            await pilot.press(*"/attach /no/such/file.png", "enter")
            await asyncio.sleep(0.3)
            assert app.query_one("#composer").value == "/attach /no/such/file.png"  # kept

    asyncio.run(scenario())
    sent = Message.objects.get(thread=alice_thread, speaker="user")
    assert sent.text == "@assistant read my notes"
    assert [a.name for a in sent.attachments.all()] == ["my notes.md"]
