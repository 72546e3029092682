"""The docs' lists are the registries' (a test, not a hand kept in step): slash commands and
built-in tools (docs/using.md), provider kinds (docs/providers.md) and the API's endpoints
(docs/api.md, rendered from the OpenAPI schema). A registry entry added without its line fails
here; `PARLEY_WRITE_DOCS=1` rewrites the generated endpoint table."""

from __future__ import annotations

import os
import re
from pathlib import Path

from django.conf import settings

from apps.api.api import api
from apps.chat.council.commands import command_list
from apps.chat.council.tools import tool_names
from apps.providers.registry import DESCRIPTIONS

ROOT = Path(settings.BASE_DIR)
README = (ROOT / "README.md").read_text()
USING = (ROOT / "docs" / "using.md").read_text()
PROVIDERS = (ROOT / "docs" / "providers.md").read_text()
API_DOC = ROOT / "docs" / "api.md"
ENDPOINTS_START = (
    "<!-- endpoints: generated from /api/v1/schema, checked by tests/test_docs_lists.py -->"
)
ENDPOINTS_END = "<!-- /endpoints -->"


def table_after(text: str, header: str) -> list[str]:
    start = text.index(header)
    return text[start : text.index("\n\n", start)].splitlines()[2:]


def test_the_table_of_slash_commands_is_the_registry():
    first_cells = [line.split("|")[1] for line in table_after(USING, "| command | effect |")]
    listed = {name for cell in first_cells for name in re.findall(r"`/([a-z]+)", cell)}
    commands = {entry["name"] for entry in command_list()}
    aliases = {"w"}  # /w is /whisper
    assert commands <= listed, f"missing from docs/using.md: {sorted(commands - listed)}"
    assert listed - aliases <= commands, f"not commands: {sorted(listed - aliases - commands)}"


def test_every_built_in_tool_is_named():
    start = USING.index("**Tools.**")
    paragraph = USING[start : USING.index("\n\n", start)]
    named = set(re.findall(r"`([a-z_]+)`", paragraph))
    assert set(tool_names()) <= named, f"missing: {sorted(set(tool_names()) - named)}"
    assert named <= set(tool_names()), f"not tools: {sorted(named - set(tool_names()))}"


def provider_row(d) -> str:
    """One provider kind's row, from its description."""
    about = [f"wire: `{d.wire}`", f"models: {d.model_names}"]
    if d.settings:
        named = [f"**{s.label}**" + (f" (`{s.header}`)" if s.header else "") for s in d.settings]
        about.append("settings: " + ", ".join(named))
    refused: dict[str, list[str]] = {}
    for prefix, names in d.refuses:
        for name in names:
            refused.setdefault(name, []).append(f"{prefix}…" if prefix else "every model")
    if refused:
        about.append("its server refuses " + "; ".join(
            f"`{name}` for {', '.join(models)}" for name, models in refused.items()))  # fmt: skip
    if d.base_url == "none":
        base = "—"
    elif d.base_url == "required":
        base = f"required: {d.base_url_hint}"
    elif d.default_base_url:
        base = f"empty: `{d.default_base_url}`"
    else:
        base = d.base_url_hint
    key = "none" if not d.takes_key else "required" if d.needs_key else "optional"
    if key == "required" and {"bearer", "header"} <= set(d.auth_styles):
        key += "; or a bearer token or custom header"
    return f"| `{d.kind}` | {d.label} ({'; '.join(about)}) | {base} | {key} |"


def test_the_table_of_providers_is_the_registry():
    header = "| provider | label | base URL | key |\n| --- | --- | --- | --- |\n"
    start = PROVIDERS.index(header)
    end = PROVIDERS.index("\n\n", start)
    expected = header + "\n".join(provider_row(d) for d in DESCRIPTIONS)
    if os.environ.get("PARLEY_WRITE_DOCS"):
        path = ROOT / "docs" / "providers.md"
        path.write_text(PROVIDERS[:start] + expected + PROVIDERS[end:])
        return
    assert PROVIDERS[start:end] == expected, (
        "docs/providers.md's table differs from the descriptions: run "
        "`PARLEY_WRITE_DOCS=1 .venv/bin/python -m pytest tests/test_docs_lists.py`"
    )


def endpoint_table() -> str:
    """The endpoints as the schema describes them: one row per operation."""
    rows = ["| method and path | what it does |", "| --- | --- |"]
    for path, operations in api.get_openapi_schema()["paths"].items():
        for method, operation in operations.items():
            said = operation.get("summary", "")
            detail = (operation.get("description") or "").split("\n\n")[0].replace("\n", " ")
            if detail and detail.rstrip(".") != said.rstrip("."):
                lead = detail[0] if detail[1:2].isupper() else detail[0].lower()  # "PDFs" stays
                said = f"{said}: {lead}{detail[1:]}"
            rows.append(f"| `{method.upper()} {path.removeprefix('/api/v1')}` | {said} |")
    return "\n".join(rows)


def test_the_api_endpoint_table_is_the_openapi_schema():
    text = API_DOC.read_text()
    start, end = text.index(ENDPOINTS_START), text.index(ENDPOINTS_END)
    expected = f"{ENDPOINTS_START}\n{endpoint_table()}\n{ENDPOINTS_END}"
    if os.environ.get("PARLEY_WRITE_DOCS"):
        API_DOC.write_text(text[:start] + expected + text[end + len(ENDPOINTS_END) :])
        text = API_DOC.read_text()
    assert text[start : end + len(ENDPOINTS_END)] == expected, (
        "docs/api.md's endpoint table differs from the schema: run "
        "`PARLEY_WRITE_DOCS=1 .venv/bin/python -m pytest tests/test_docs_lists.py`"
    )


def test_the_readme_is_short_and_its_links_lead_somewhere():
    assert len(README.splitlines()) < 300
    for target in re.findall(r"\]\((docs/[^)#]+)", README):
        assert (ROOT / target).exists(), target


def test_the_import_sources_everywhere_are_the_registry():
    """Every place that names the sources names them all (the Import page, the API and the
    CLI are rendered from the registry; the docs are checked here)."""
    from apps.imports.sources.reading import GUIDE, sources_sentence

    labels = [label for label, _ in GUIDE]
    importing = (ROOT / "docs" / "importing.md").read_text()
    rows = table_after(importing, "| source | where to get it | what comes in |")
    assert [row.split("|")[1].strip() for row in rows] == labels
    for name, text in [("README.md", README), ("docs/importing.md", importing),
                       ("docs/api.md", API_DOC.read_text())]:  # fmt: skip
        flat = " ".join(text.split())
        lists = re.findall(
            r"ChatGPT(?:, [A-Z][\w ]*?)+,? (?:or|and) (?:another |itself )?[A-Z]\w*", flat
        )
        assert lists, f"{name} no longer lists the sources"
        for listed in lists:
            names = [n.removeprefix("another ") for n in re.split(r", | or | and ", listed)]
            assert names == labels, f"{name} names the sources as {listed!r}"
    assert sources_sentence() == ", ".join(labels[:-1]) + " or " + labels[-1]
