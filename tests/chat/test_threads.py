"""Branches, edit-and-resend, clearing, automatic names, settings and the summary strip."""

from __future__ import annotations

import pytest

from apps.chat.council.lifecycle import session_apply_settings, thread_clear
from apps.chat.council.posting import message_edit, message_post
from apps.chat.models import Message, MessageStatus, Thread
from apps.chat.records.naming import thread_name, unique_name
from apps.chat.records.threads import thread_branch, thread_create, thread_rename
from apps.chat.selectors import PAGE_SIZE, thread_tree, transcript_messages
from apps.chat.usage import session_usage
from apps.chat.web.forms import SessionSettingsForm
from apps.providers.selectors import credentials_for_user
from apps.roles.models import Role

pytestmark = pytest.mark.django_db


def say(thread, text):
    posted = message_post(thread=thread, author=thread.session.owner, text=text)
    Message.objects.filter(pk__in=[r.pk for r in posted.replies]).update(
        status=MessageStatus.DONE, content=[{"type": "text", "text": f"re: {text}"}]
    )
    return posted


def texts(thread):
    return [m.text for m in transcript_messages(thread=thread)]


@pytest.mark.parametrize(
    ("text", "name"),
    [
        ("hi", ""),
        ("Hello there!", ""),
        ("@director how should the harbour scene at dawn open?", "Harbour Scene Dawn Open"),
        ("Can you review `def f(): pass` and the caching layer design please",
         "Review Caching Layer Design"),
        ("Plan the Lisbon shoot schedule for October with budget limits and crew sizes",
         "Plan Lisbon Shoot Schedule October Budget"),
        ("Please check /home/alice/secrets/prod.env", "Check prod.env"),
        ("Please check C:\\Users\\alice\\keys\\deploy.pem for me", "Check deploy.pem"),
        ("my api key is sk-ant-api03-Zx9kQ2mL7pR4 rotate it now", ""),
        ("rotate the leaked key sk-ant-api03-Zx9kQ2mL7pR4 in production",
         "Rotate Leaked Key Production"),
        ("why does commit 9f2c4e1a7b3d5f60 break the iOS build", "Commit Break iOS Build"),
        ("token=ghp_abcdEFGH1234ijklMNOP5678 leaked in the release notes", "Leaked Release Notes"),
        ("debug password: hunter2 on the staging server", "Debug Staging Server"),
        ("Look at https://example.com/page and plan the harbour tonight",
         "Look Plan Harbour Tonight"),
        ("see http://intranet.local/a/b/secret-report.pdf?x=1 before the shoot",
         "See Shoot"),
        ("compare www.example.org/docs/setup with our crew notes", "Compare Crew Notes"),
    ],
)  # fmt: skip
def test_thread_names(text, name):
    assert thread_name(text) == name
    assert len(thread_name(text)) <= 60


def test_names_are_automatic_and_unique_within_the_session(
    alice_thread, alice_session, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=True):  # named once the post is committed
        say(alice_thread, "hi")
    alice_thread.refresh_from_db()
    assert alice_thread.label == ""  # nothing substantive yet
    with django_capture_on_commit_callbacks(execute=True) as named:
        say(alice_thread, "How should the harbour scene open?")
        alice_thread.refresh_from_db()
        assert alice_thread.label == ""  # not inside the post's transaction
    assert named
    alice_thread.refresh_from_db()
    assert alice_thread.label == "Harbour Scene Open"
    other = thread_create(session=alice_session)
    with django_capture_on_commit_callbacks(execute=True):
        say(other, "How should the harbour scene open?")
    other.refresh_from_db()
    assert other.label == "Harbour Scene Open 2"
    assert unique_name("x" * 60, {"x" * 60}).endswith(" 2")


def test_branch_from_here_keeps_the_history_up_to_that_message(alice_thread):
    first = say(alice_thread, "one")
    say(alice_thread, "two")
    branch = thread_branch(thread=alice_thread, message=first.replies[0])
    assert texts(branch) == ["one", "re: one"]
    say(branch, "three")
    assert texts(branch) == ["one", "re: one", "three", "re: three"]
    assert texts(alice_thread) == ["one", "re: one", "two", "re: two"]
    # A branch of a branch, from an inherited message.
    nested = thread_branch(thread=branch, message=first.user_message)
    assert texts(nested) == ["one"]
    tree = [
        (t.pk, depth)
        for t, depth in thread_tree(session=alice_thread.session, user=alice_thread.session.owner)
    ]
    assert (branch.pk, 1) in tree and (alice_thread.pk, 0) in tree


def test_editing_a_message_sends_it_again_as_a_branch(alice_thread):
    say(alice_thread, "one")
    second = say(alice_thread, "two")
    posted = message_edit(
        message=second.user_message, author=alice_thread.session.owner, text="TWO, better"
    )
    branch = posted.redirect_to
    assert branch.parent == alice_thread
    assert texts(branch)[:3] == ["one", "re: one", "TWO, better"]
    assert texts(alice_thread) == ["one", "re: one", "two", "re: two"]  # the original stays


def test_clearing_deletes_messages_but_branches_keep_their_history(alice_thread):
    first = say(alice_thread, "one")
    branch = thread_branch(thread=alice_thread, message=first.replies[0])
    say(branch, "two")
    thread_clear(thread=alice_thread)
    assert not Message.objects.filter(thread=alice_thread).exists()
    branch.refresh_from_db()
    assert branch.parent is None
    assert texts(branch) == ["one", "re: one", "two", "re: two"]
    say(alice_thread, "fresh start")
    assert texts(alice_thread) == ["fresh start", "re: fresh start"]


def settings_form(session, **changes):
    data = {
        "credential": "",
        "model": "",
        "persona": "I direct documentaries.",
        "memory": "Budget is small.",
        "addressing_mode": "broadcast",
        "auto_rounds": "2",
        "turn_mode": "broadcast",
        "reply_length": "normal",
        "tools": ["read_memory", "list_roles"],
        "roles": [str(r.pk) for r in Role.objects.filter(handle__in=["assistant", "director"])],
        **changes,
    }
    director = Role.objects.get(handle="director")
    data[f"model_{director.pk}"] = "claude-opus-5"
    return SessionSettingsForm(
        data, session=session, credentials=credentials_for_user(user=session.owner)
    )


def test_settings_apply_to_the_next_turn(alice_thread):
    session = alice_thread.session
    form = settings_form(session)
    assert form.is_valid(), form.errors
    session_apply_settings(session=session, change=form.change(), apply_now=False)
    session.refresh_from_db()
    assert (session.persona, session.memory, session.addressing_mode, session.auto_rounds) == (
        "I direct documentaries.", "Budget is small.", "broadcast", 2,
    )  # fmt: skip
    assert "update_memory" in session.disabled_tools and "read_memory" not in session.disabled_tools
    handles = set(session.session_roles.values_list("role__handle", flat=True))
    assert handles == {"assistant", "director"}
    assert session.session_roles.get(role__handle="director").model_override == "claude-opus-5"
    assert not settings_form(session, auto_rounds="99").is_valid()
    assert not settings_form(session, roles=[]).is_valid()
    assert not settings_form(session, persona="x" * 20_001).is_valid()


def test_a_role_can_have_its_own_credential(alice_thread, emulated_anthropic):
    session = alice_thread.session
    director = Role.objects.get(handle="director")
    form = settings_form(
        session, **{f"credential_{director.pk}": str(emulated_anthropic.public_id)}
    )
    assert form.is_valid(), form.errors
    session_apply_settings(session=session, change=form.change(), apply_now=False)
    link = session.session_roles.get(role=director)
    assert (link.credential, link.model_override) == (emulated_anthropic, "claude-opus-5")
    posted = message_post(thread=alice_thread, author=session.owner, text="@all hi")
    models = {r.speaker: (r.provider, r.model) for r in posted.replies}
    assert models == {"assistant": ("demo", "demo-1"), "director": ("anthropic", "claude-opus-5")}
    html = SessionSettingsForm(
        session=session, credentials=credentials_for_user(user=session.owner)
    )
    assert html.role_table()[1]["credential"].value() == emulated_anthropic.public_id


def test_apply_now_retargets_waiting_replies(alice_thread, emulated_anthropic):
    posted = message_post(thread=alice_thread, author=alice_thread.session.owner, text="hi")
    waiting = posted.replies[0]
    assert waiting.provider == "demo"
    form = settings_form(alice_thread.session, credential=str(emulated_anthropic.public_id))
    assert form.is_valid(), form.errors
    session_apply_settings(session=alice_thread.session, change=form.change(), apply_now=True)
    waiting.refresh_from_db()
    assert (waiting.provider, waiting.credential) == ("anthropic", emulated_anthropic)


def test_the_summary_strip_sums_usage(alice_thread):
    first, second, unfinished = (say(alice_thread, text).replies[0] for text in "abc")
    Message.objects.filter(pk=first.pk).update(
        usage={"input": 100, "output": 50, "cache_read": 300, "cache_write": 100},
        ttft_ms=200, duration_ms=1000, finished_at="2026-01-01T00:00:00Z",
    )  # fmt: skip
    Message.objects.filter(pk=second.pk).update(  # an error before any usage was reported
        usage={"output": 7}, ttft_ms=301, duration_ms=None, finished_at="2026-01-01T00:00:00Z"
    )
    Message.objects.filter(pk=unfinished.pk).update(usage={"input": 9999}, finished_at=None)
    usage = session_usage(session=alice_thread.session)
    assert (usage.replies, usage.input_tokens, usage.output_tokens) == (2, 100, 57)
    assert (usage.avg_ttft_ms, usage.avg_duration_ms) == (250, 1000)
    assert usage.cache_hit_share == 0.6
    assert Thread.objects.filter(session=alice_thread.session).count() == 1


def test_the_thread_page_does_not_query_per_message(alice_thread, django_assert_max_num_queries):
    from django.test import Client
    from django.urls import reverse

    for number in range(25):
        say(alice_thread, f"@all point {number}")
    branch = thread_branch(
        thread=alice_thread, message=Message.objects.filter(thread=alice_thread).last()
    )
    client = Client()
    client.force_login(alice_thread.session.owner)
    for thread in (alice_thread, branch):
        url = reverse("chat:thread_detail", kwargs={"thread": thread.public_id})
        with django_assert_max_num_queries(25):
            response = client.get(url)
        assert response.status_code == 200
    # 25 x 7 messages in the branch's history: the page shows the latest PAGE_SIZE, and a link
    # that loads the earlier ones as the reader scrolls up.
    html = response.content.decode()
    assert html.count("<article") == PAGE_SIZE < 25 * 7
    assert 'id="earlier"' in html


def test_branches_are_numbered_first_so_a_narrow_sidebar_tells_them_apart(alice_thread):
    from apps.chat.records.naming import branch_name

    thread_rename(thread=alice_thread, label="Harbour Scene Open at Dawn with Boats")
    first = say(alice_thread, "one")
    one = thread_branch(thread=alice_thread, message=first.user_message)
    two = thread_branch(thread=alice_thread, message=first.user_message)
    assert one.label == "Branch 1 · Harbour Scene Open at Dawn with Boats"
    assert two.label == "Branch 2 · Harbour Scene Open at Dawn with Boats"
    # A branch of a branch counts on from the root's name, never "Branch 1 · Branch 1 · …".
    assert thread_branch(thread=one, message=None).label.startswith("Branch 3 · Harbour")
    assert len(branch_name("x" * 80, set())) <= 60


def test_a_thread_its_messages_cannot_name_is_named_from_its_first_reply(alice_thread):
    from apps.chat.council.orchestration import queue_next

    posted = say(alice_thread, "hi")
    Message.objects.filter(pk=posted.replies[0].pk).update(
        content=[{"type": "text", "text": "Hello! Shall we plan the lighthouse shoot?"}]
    )
    alice_thread.refresh_from_db()
    assert alice_thread.label == ""
    queue_next(thread_id=alice_thread.pk)  # what the worker runs once the turn has settled
    alice_thread.refresh_from_db()
    assert alice_thread.label == "Shall Plan Lighthouse Shoot"
