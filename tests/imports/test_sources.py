"""Reading each product's export into a tree, and the tree into Parley's threads: no database."""

from __future__ import annotations

import json
import zipfile

import pytest

from apps.imports.layout import layout
from apps.imports.sources.common import MAX_MESSAGE_CHARS
from apps.imports.sources.reading import UnreadableFile, read_export
from tests.imports.exports import (
    PNG_1PX,
    chatgpt_trip,
    chatgpt_with_image,
    chatgpt_zip,
    claude_conversation,
    librechat_export,
    openwebui_chat,
    write_json,
)


def only(path):
    entries = list(read_export(path))
    assert len(entries) == 1 and entries[0].conversation is not None, entries
    return entries[0].conversation


def lines(conversation):
    """Each planned thread as (parent, fork index, its texts)."""
    return [
        (t.parent, t.fork_at, [m.text for m in t.messages]) for t in layout(conversation).threads
    ]


def test_a_chatgpt_tree_keeps_its_edit_and_its_regeneration_as_branches(tmp_path):
    found = only(write_json(tmp_path / "conversations.json", [chatgpt_trip()]))
    assert found.title == "Lisbon trip" and found.key.startswith("chatgpt:")
    # The main thread ends where the person last looked (current_node); the tool step between
    # the question and its answer is left out and said so.
    assert lines(found) == [
        (None, None, ["Plan a trip to Lisbon", "Day one: Alfama.", "And the weather?",
                      "Mild, about 21 °C."]),
        (0, 0, ["Start in Belém."]),  # the regenerated answer: forks after the question
        (0, None, ["Plan a trip to Porto", "Ribeira first."]),  # the edit: shares nothing
    ]  # fmt: skip
    assert found.voices == ["gpt-4o", "o3"]
    assert found.skipped == {"tool output (code runs, searches, browsing)": 1}
    assert found.created_at.year == 2023 and found.messages[0].created_at is not None


def test_a_chatgpt_zip_brings_the_images_the_person_sent(tmp_path):
    path = chatgpt_zip(tmp_path / "export.zip", [chatgpt_with_image("c-img")],
                       {"file-Ab12Cd34Ef56-dot.png": PNG_1PX})  # fmt: skip
    question = only(path).messages[0]
    assert question.text == "What is in this picture?"
    assert [(f.name, f.data) for f in question.files] == [("dot.png", PNG_1PX)]
    # The same conversation as bare JSON: the image is named as left out, not lost silently.
    bare = only(write_json(tmp_path / "conversations.json", [chatgpt_with_image("c-img")]))
    assert bare.messages[0].files == []
    assert "images not in the file" in next(iter(bare.skipped))


def test_a_claude_export_keeps_the_text_of_attached_files_and_drops_its_reasoning(tmp_path):
    found = only(write_json(tmp_path / "conversations.json", [claude_conversation()]))
    assert [(m.speaker, m.text) for m in found.messages] == [
        ("user", "Write a sonnet about rain."),
        ("assistant", "Upon the roof the patient rain..."),
    ]
    assert [(f.name, f.data) for f in found.messages[0].files] == [("notes.txt", b"grey skies")]
    assert found.skipped == {"Claude's private reasoning": 1}
    assert found.voices == ["Claude"]


def test_an_open_webui_export_keeps_each_models_answer_and_the_image(tmp_path):
    found = only(write_json(tmp_path / "export.json", [openwebui_chat()]))
    assert lines(found) == [
        (None, None, ["Explain recursion", "See: recursion."]),  # currentId
        (0, 0, ["A function calling itself."]),
    ]
    assert found.voices == ["llama3.1:8b", "qwen2.5:7b"]
    assert found.messages[0].files[0].data == PNG_1PX


@pytest.mark.parametrize("nested", [True, False])
def test_a_librechat_export_reads_nested_or_listed_messages(tmp_path, nested):
    found = only(write_json(tmp_path / "moons.json", librechat_export(nested=nested)))
    assert found.title == "Moons"
    assert lines(found) == [
        (None, None, ["Name three moons", "Phobos, Deimos, the Moon."]),  # the latest leaf
        (0, 0, ["Io, Europa, Titan."]),
    ]
    assert found.voices == ["gpt-4o", "gpt-4o-mini"]


def test_one_broken_conversation_is_reported_and_the_others_read(tmp_path):
    broken = chatgpt_trip("c-broken")
    broken["mapping"]["q2"]["parent"] = "a2"  # a loop: q2 → a2 → tool → q2
    broken["mapping"]["a2"]["parent"] = "tool"
    data = [chatgpt_trip("c-good-1"), broken, "not a conversation", {"what": "is this"},
            chatgpt_trip("c-good-2")]  # fmt: skip
    entries = list(read_export(write_json(tmp_path / "conversations.json", data)))
    assert [(e.position, bool(e.conversation)) for e in entries] == [
        (1, True), (2, False), (3, False), (4, False), (5, True)]  # fmt: skip
    assert "loop" in entries[1].broken and entries[1].title == "Lisbon trip"
    assert "not a conversation" in entries[2].broken
    assert "does not know this kind of export" in entries[3].broken


def test_a_file_cut_off_midway_imports_what_came_before_and_says_where(tmp_path):
    text = json.dumps([chatgpt_trip("c-1"), chatgpt_trip("c-2")])
    path = tmp_path / "conversations.json"
    path.write_text(text[: len(text) * 3 // 4])
    read = list(read_export(path))
    assert len(read) == 2 and read[0].conversation is not None  # the first imports
    assert "after conversation 1" in read[1].broken and read[1].conversation is None
    path.write_text(text[:40])  # cut inside the first: nothing to import, said so
    with pytest.raises(UnreadableFile, match="not valid JSON"):
        list(read_export(path))


@pytest.mark.parametrize(
    ("content", "says"),
    [
        (b"", "empty"),
        (b"\x89PNG\r\n\x1a\n not an export", "not a JSON export"),
        (b'{"half": ', "not valid JSON"),
        (b"PK\x03\x04 not really a zip", "not a JSON export"),
    ],
)
def test_files_that_are_not_exports_are_refused_in_words(tmp_path, content, says):
    path = tmp_path / "upload.json"
    path.write_bytes(content)
    with pytest.raises(UnreadableFile, match=says):
        list(read_export(path))


def test_a_zip_without_conversations_is_refused(tmp_path):
    path = tmp_path / "x.zip"
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("notes.txt", "hi")
    with pytest.raises(UnreadableFile, match=r"no conversations\.json"):
        list(read_export(path))


def test_hostile_fields_are_kept_as_text_nul_replaced_huge_cut(tmp_path):
    trip = chatgpt_trip("c-hostile")
    trip["title"] = "<script>alert(1)</script>\x00" + "x" * 500
    trip["mapping"]["q1"]["message"]["content"]["parts"] = ["<img src=x onerror=alert(1)>\x00"]
    trip["mapping"]["a1"]["message"]["content"]["parts"] = ["y" * (MAX_MESSAGE_CHARS + 10)]
    trip["mapping"]["a1"]["message"]["metadata"]["model_slug"] = "<b>gpt</b>\x00" + "m" * 500
    found = only(write_json(tmp_path / "conversations.json", [trip]))
    assert found.title.startswith("<script>alert(1)</script>\ufffd") and len(found.title) == 120
    assert found.messages[0].text == "<img src=x onerror=alert(1)>\ufffd"
    assert len(found.messages[1].text) == MAX_MESSAGE_CHARS
    assert (
        found.messages[1].model.startswith("<b>gpt</b>\ufffd")
        and len(found.messages[1].model) == 120
    )
    assert any("cut" in reason for reason in found.skipped)


def claude_line(*texts: str) -> dict:
    """A Claude conversation of one line, each message naming the one before as its parent."""
    conversation = claude_conversation("9e0d1c2b-0000-4000-8000-000000000046")
    messages, parent = [], "00000000-0000-4000-8000-000000000000"
    for number, text in enumerate(texts):
        uuid_ = f"m{number}"
        messages.append({"uuid": uuid_, "text": text, "parent_message_uuid": parent,
                         "sender": "human" if number % 2 == 0 else "assistant",
                         "created_at": f"2024-06-01T09:0{number}:00.000000+00:00",
                         "content": [{"type": "text", "text": text}],
                         "attachments": [], "files": []})  # fmt: skip
        parent = uuid_
    conversation["chat_messages"] = messages
    return conversation


def test_an_empty_claude_message_does_not_split_its_conversation(tmp_path):
    """A message of `[{"type": "text", "text": ""}]` is left out, and the next one takes its
    parent: one line, no branch, starting where the person started."""
    data = claude_line("Hello?", "Hi there.", "", "Are you still there?", "I am.")
    data["model"] = "claude-3-5-sonnet-20241022"
    found = only(write_json(tmp_path / "conversations.json", [data]))
    assert lines(found) == [(None, None, ["Hello?", "Hi there.", "Are you still there?",
                                          "I am."])]  # fmt: skip
    assert layout(found).branches == 0 and found.skipped["empty messages"] == 1
    assert found.messages[1].model == "claude-3-5-sonnet-20241022"  # the conversation's


def test_a_single_open_webui_chat_without_its_wrapper_is_read(tmp_path):
    """`{id, title, models, history}`: what Open WebUI's own Import takes."""
    chat = openwebui_chat()["chat"]
    chat["id"] = "a3f1c2d4-0000-4000-8000-0000000000bb"
    found = only(write_json(tmp_path / "chat.json", chat))
    assert found.key == "openwebui:a3f1c2d4-0000-4000-8000-0000000000bb"
    assert [m.text for m in found.messages][:1] == ["Explain recursion"]


def test_open_webui_reasoning_and_tool_calls_are_left_out_and_counted(tmp_path):
    export = openwebui_chat()
    answer = export["chat"]["history"]["messages"]["b1"]
    answer["content"] = ('<details type="reasoning" done="true" duration="3">\n<summary>Thought '
                         'for 3 seconds</summary>\n&gt; hmm\n</details>\n255')  # fmt: skip
    other = export["chat"]["history"]["messages"]["b2"]
    other["content"] = '<details type="reasoning">x</details>raw'
    other["output"] = [{"type": "reasoning", "content": []},
                       {"type": "message", "content": [{"type": "output_text",
                                                        "text": "The clean answer."}]}]  # fmt: skip
    found = only(write_json(tmp_path / "chats.json", [export]))
    texts = {m.key: m.text for m in found.messages}
    assert texts["b1"] == "255" and texts["b2"] == "The clean answer."
    assert found.skipped["the model's private reasoning"] == 2


def test_missing_times_come_from_the_neighbours_not_the_import(tmp_path):
    export = librechat_export(nested=False)
    for message in export["messages"][1:]:
        del message["createdAt"]
    del export["exportAt"]
    found = only(write_json(tmp_path / "librechat.json", export))
    times = {m.key: m.created_at for m in found.messages}
    assert times["a"] == times["b"] == times["q"]  # their parent's
    assert found.created_at == times["q"] and found.created_at.year == 2024
    assert found.updated_at is not None and found.updated_at.year == 2024


def test_empty_conversations_are_skipped_and_counted(tmp_path):
    from apps.imports.scanning import scan

    empty = claude_conversation("00000000-0000-4000-8000-0000000000e0")
    empty["chat_messages"] = []
    preview = scan(write_json(tmp_path / "conversations.json",
                              [empty, claude_conversation()]), imported=set())  # fmt: skip
    assert preview["conversations"] == 1
    assert {"what": "empty conversations (nothing in them to import)", "count": 1} in (
        preview["skipped"]
    )


def test_chatgpt_citations_become_links_and_a_stopped_reply_stays_stopped(tmp_path):
    from tests.imports.exports import chatgpt_node

    text = (
        "Lisbon has seven hills【3:0†source】 and trams.\ue200cite\ue202turn0search1\ue201 Sunny."
    )
    answer = chatgpt_node("a", "q", "assistant", text, at=1_700_000_001.0, model="gpt-4o")
    start = text.index("【")
    answer["message"]["metadata"]["citations"] = [
        {"start_ix": start, "end_ix": text.index("】") + 1,
         "metadata": {"title": "Hills of Lisbon", "url": "https://example.org/hills"}},
    ]  # fmt: skip
    answer["message"]["metadata"]["finish_details"] = {"type": "interrupted"}
    nodes = [chatgpt_node("root", None, None, "", at=None, children=["q"]),
             chatgpt_node("q", "root", "user", "Tell me about Lisbon", at=1_700_000_000.0,
                          children=["a"]), answer]  # fmt: skip
    data = {"title": "Lisbon", "mapping": {n["id"]: n for n in nodes}, "current_node": "a",
            "conversation_id": "c-cite", "id": "c-cite"}  # fmt: skip
    found = only(write_json(tmp_path / "conversations.json", [data]))
    reply = found.messages[-1]
    assert reply.text == (
        "Lisbon has seven hills [Hills of Lisbon](https://example.org/hills) and trams. Sunny."
    )
    assert found.skipped["citation markers whose source the export does not hold"] == 1
    assert reply.interrupted and not found.messages[0].interrupted


def test_claude_files_whose_text_is_kept_are_not_called_left_out(tmp_path):
    conversation = claude_conversation()
    conversation["chat_messages"][0]["files"] = [{"file_name": "notes.txt"},
                                                 {"file_name": "photo.jpg"}]  # fmt: skip
    found = only(write_json(tmp_path / "conversations.json", [conversation]))
    assert (
        dict(found.skipped).get(
            "files Claude's export holds only the names of (pictures, documents)"
        )
        == 1
    )
    assert [f.name for f in found.messages[0].files] == ["notes.txt"]


def test_a_librechat_chats_instructions_are_counted_as_left_out(tmp_path):
    export = librechat_export()
    export["options"] = {"model": "gpt-4o", "promptPrefix": "You are a pirate."}
    found = only(write_json(tmp_path / "librechat.json", export))
    assert found.skipped["the chat's instructions (set them as the session's persona)"] == 1


def test_claudes_old_markup_is_read_as_what_it_holds(tmp_path):
    """`<antThinking>` is Claude's private reasoning (left out, counted); an `<antArtifact>`
    is its content: code fenced under its title, a document as itself."""
    conversation = claude_conversation()
    reply = conversation["chat_messages"][1]
    reply["content"] = [{"type": "text", "text": (
        "<antThinking>A script would help here.</antThinking>\nHere it is:\n\n"
        '<antArtifact identifier="rain" type="application/vnd.ant.code" language="python" '
        'title="Rain counter">\nprint("drip")\n</antArtifact>\n\n'
        '<antArtifact identifier="poem" type="text/markdown" title="Poem">\n# Rain\n'
        "</antArtifact>"
    )}]  # fmt: skip
    found = only(write_json(tmp_path / "conversations.json", [conversation]))
    assert found.messages[1].text == (
        'Here it is:\n\n**Rain counter**\n\n```python\nprint("drip")\n```\n\n**Poem**\n\n# Rain'
    )
    assert found.skipped["Claude's private reasoning"] == 1


def chatbot_ui_conversation(number: int) -> dict:
    return {"id": f"cbui-{number}", "name": f"Chat {number}", "folderId": None,
            "model": {"id": "gpt-4", "name": "GPT-4", "maxLength": 24000, "tokenLimit": 8000},
            "prompt": "You are a helpful assistant.", "temperature": 1,
            "messages": [{"role": "user", "content": f"Question {number}"},
                         {"role": "assistant", "content": f"Answer {number}"}]}  # fmt: skip


@pytest.mark.parametrize("shape", ["version 4", "a list (older)"])
def test_a_chatbot_ui_export_is_read(tmp_path, shape):
    conversations = [chatbot_ui_conversation(1), chatbot_ui_conversation(2)]
    document = ({"version": 4, "history": conversations, "folders": [], "prompts": []}
                if shape == "version 4" else conversations)  # fmt: skip
    entries = list(read_export(write_json(tmp_path / "chatbot_ui_history.json", document)))
    assert [e.format for e in entries] == ["chatbotui", "chatbotui"]
    first = entries[0].conversation
    assert first is not None and first.key == "chatbotui:cbui-1" and first.title == "Chat 1"
    assert lines(first) == [(None, None, ["Question 1", "Answer 1"])]
    assert first.voices == ["gpt-4"]
    assert first.skipped["the chat's instructions (set them as the session's persona)"] == 1
