"""Export files shaped as each product writes them (from their published descriptions and
real exports' structure), built small so each test reads what it checks."""

from __future__ import annotations

import io
import json
import uuid
import zipfile
from pathlib import Path


def _png() -> bytes:
    from PIL import Image

    out = io.BytesIO()
    Image.new("RGB", (8, 8), (200, 40, 40)).save(out, format="PNG")
    return out.getvalue()


PNG_1PX = _png()  # a small real picture, as a person's upload would be


def chatgpt_node(node_id, parent, role, text, *, at, model="", children=(), hidden=False,
                 content_type="text", parts=None):  # fmt: skip
    message = None
    if role is not None:
        message = {
            "id": node_id,
            "author": {"role": role, "name": None, "metadata": {}},
            "create_time": at,
            "update_time": None,
            "content": {
                "content_type": content_type,
                "parts": parts if parts is not None else [text],
            },
            "status": "finished_successfully",
            "end_turn": True,
            "weight": 1.0,
            "metadata": {
                **({"model_slug": model} if model else {}),
                **({"is_visually_hidden_from_conversation": True} if hidden else {}),
            },
            "recipient": "all",
        }
        if content_type in ("code", "execution_output"):
            message["content"] = {"content_type": content_type, "text": text}
    return {"id": node_id, "message": message, "parent": parent, "children": list(children)}


def chatgpt_trip(conversation_id: str = "6743e0aa-0001-8000-a000-000000000001") -> dict:
    """A ChatGPT conversation with an edited first question (a sibling under the hidden system
    message), a regenerated answer, and a tool step between a question and its answer."""
    t = 1_700_000_000.0
    nodes = [
        chatgpt_node("root", None, None, "", at=None, children=["sys"]),
        chatgpt_node("sys", "root", "system", "", at=None, children=["q1", "q1-edit"], hidden=True),
        chatgpt_node(
            "q1", "sys", "user", "Plan a trip to Lisbon", at=t + 1, children=["a1", "a1-again"]
        ),
        chatgpt_node(
            "a1", "q1", "assistant", "Day one: Alfama.", at=t + 2, model="gpt-4o", children=["q2"]
        ),
        chatgpt_node("a1-again", "q1", "assistant", "Start in Belém.", at=t + 3, model="gpt-4o"),
        chatgpt_node("q2", "a1", "user", "And the weather?", at=t + 4, children=["tool"]),
        chatgpt_node(
            "tool",
            "q2",
            "tool",
            '{"temp": 21}',
            at=t + 5,
            children=["a2"],
            content_type="execution_output",
        ),
        chatgpt_node(
            "a2", "tool", "assistant", "Mild, about 21 °C.", at=t + 6, model="o3", children=[]
        ),
        chatgpt_node(
            "q1-edit", "sys", "user", "Plan a trip to Porto", at=t + 7, children=["a1-porto"]
        ),
        chatgpt_node(
            "a1-porto", "q1-edit", "assistant", "Ribeira first.", at=t + 8, model="gpt-4o"
        ),
    ]
    return {
        "title": "Lisbon trip",
        "create_time": t,
        "update_time": t + 9,
        "mapping": {node["id"]: node for node in nodes},
        "moderation_results": [],
        "current_node": "a2",
        "plugin_ids": None,
        "conversation_id": conversation_id,
        "conversation_template_id": None,
        "id": conversation_id,
        "default_model_slug": "gpt-4o",
    }


def chatgpt_with_image(conversation_id: str, file_id: str = "file-Ab12Cd34Ef56") -> dict:
    t = 1_700_100_000.0
    parts = [
        {"content_type": "image_asset_pointer", "asset_pointer": f"file-service://{file_id}",
         "size_bytes": len(PNG_1PX), "width": 1, "height": 1},
        "What is in this picture?",
    ]  # fmt: skip
    nodes = [
        chatgpt_node("root", None, None, "", at=None, children=["q"]),
        chatgpt_node(
            "q",
            "root",
            "user",
            "",
            at=t,
            children=["a"],
            content_type="multimodal_text",
            parts=parts,
        ),
        chatgpt_node("a", "q", "assistant", "A single dot.", at=t + 1, model="gpt-4o"),
    ]
    return {"title": "A picture", "create_time": t, "update_time": t + 1,
            "mapping": {n["id"]: n for n in nodes}, "current_node": "a",
            "conversation_id": conversation_id, "id": conversation_id}  # fmt: skip


def chatgpt_zip(path: Path, conversations: list[dict], files: dict[str, bytes]) -> Path:
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("conversations.json", json.dumps(conversations))
        archive.writestr("chat.html", "<html>the export's own viewer</html>")
        archive.writestr("user.json", json.dumps({"id": "user-1"}))
        for name, data in files.items():
            archive.writestr(name, data)
    return path


def claude_conversation(uuid_: str = "28d595a3-5db0-492d-a49a-af74f13de505") -> dict:
    return {
        "uuid": uuid_,
        "name": "Sonnet about rain",
        "created_at": "2024-06-01T09:00:00.000000+00:00",
        "updated_at": "2024-06-01T09:05:00.000000+00:00",
        "account": {"uuid": "acc-1"},
        "chat_messages": [
            {"uuid": "m1", "text": "Write a sonnet about rain.", "sender": "human",
             "created_at": "2024-06-01T09:00:00.000000+00:00",
             "content": [{"type": "text", "text": "Write a sonnet about rain."}],
             "attachments": [{"file_name": "notes.txt", "file_size": 11, "file_type": "txt",
                              "extracted_content": "grey skies"}],
             "files": []},
            {"uuid": "m2", "text": "", "sender": "assistant",
             "created_at": "2024-06-01T09:00:05.000000+00:00",
             "content": [{"type": "thinking", "thinking": "rhyme scheme"},
                         {"type": "text", "text": "Upon the roof the patient rain..."}],
             "attachments": [], "files": []},
        ],
    }  # fmt: skip


def openwebui_chat(chat_id: str = "a3f1c2d4-0000-4000-8000-00000000000a") -> dict:
    t = 1_718_000_000
    messages = {
        "u1": {"id": "u1", "parentId": None, "childrenIds": ["b1", "b2"], "role": "user",
               "content": "Explain recursion", "timestamp": t, "models": ["llama3.1:8b"],
               "files": [{"type": "image", "url": "data:image/png;base64,"
                          + __import__("base64").b64encode(PNG_1PX).decode()}]},
        "b1": {"id": "b1", "parentId": "u1", "childrenIds": [], "role": "assistant",
               "content": "A function calling itself.", "timestamp": t + 2, "model": "llama3.1:8b"},
        "b2": {"id": "b2", "parentId": "u1", "childrenIds": [], "role": "assistant",
               "content": "See: recursion.", "timestamp": t + 5, "model": "qwen2.5:7b"},
    }  # fmt: skip
    return {
        "id": chat_id,
        "user_id": "user-1",
        "title": "Recursion",
        "chat": {"id": "", "title": "Recursion", "models": ["llama3.1:8b"], "params": {},
                 "history": {"messages": messages, "currentId": "b2"},
                 "messages": list(messages.values()), "tags": [], "timestamp": t * 1000},
        "updated_at": t + 5,
        "created_at": t,
        "share_id": None,
        "archived": False,
    }  # fmt: skip


def librechat_export(conversation_id: str = "7c1b1d1e-0000-4000-8000-0000000000c1", *,
                     nested: bool = True) -> dict:  # fmt: skip
    zero = "00000000-0000-0000-0000-000000000000"
    q = {
        "messageId": "q",
        "parentMessageId": zero,
        "conversationId": conversation_id,
        "sender": "User",
        "text": "Name three moons",
        "isCreatedByUser": True,
        "createdAt": "2024-08-01T10:00:00.000Z",
    }
    a = {
        "messageId": "a",
        "parentMessageId": "q",
        "conversationId": conversation_id,
        "sender": "GPT-4o",
        "text": "Io, Europa, Titan.",
        "isCreatedByUser": False,
        "model": "gpt-4o",
        "createdAt": "2024-08-01T10:00:03.000Z",
    }
    b = {"messageId": "b", "parentMessageId": "q", "conversationId": conversation_id,
         "sender": "GPT-4o", "text": "Phobos, Deimos, the Moon.", "isCreatedByUser": False,
         "model": "gpt-4o-mini", "createdAt": "2024-08-01T10:01:00.000Z"}  # fmt: skip
    if nested:
        messages = [{**q, "children": [{**a, "children": []}, {**b, "children": []}]}]
    else:
        messages = [q, a, b]
    return {"conversationId": conversation_id, "endpoint": "openAI", "title": "Moons",
            "exportAt": "2024-08-02T00:00:00.000Z", "branches": True, "recursive": nested,
            "options": {"model": "gpt-4o", "endpoint": "openAI"}, "messages": messages}  # fmt: skip


def write_json(path: Path, data) -> Path:
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


def unique_id() -> str:
    return str(uuid.uuid4())


def zip_bytes(files: dict[str, bytes]) -> bytes:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as archive:
        for name, data in files.items():
            archive.writestr(name, data)
    return out.getvalue()
