"""The README's lists of slash commands and built-in tools are the registries' (a test, not
a hand kept in step: a command or tool added without its line fails here)."""

from __future__ import annotations

import re
from pathlib import Path

from django.conf import settings

from apps.chat.council.commands import command_list
from apps.chat.council.tools import tool_names

README = Path(settings.BASE_DIR / "README.md").read_text()


def test_the_readme_table_of_slash_commands_is_the_registry():
    start = README.index("| command | effect |")
    table = README[start : README.index("\n\n", start)]
    first_cells = [line.split("|")[1] for line in table.splitlines()[2:]]
    listed = {name for cell in first_cells for name in re.findall(r"`/([a-z]+)", cell)}
    commands = {entry["name"] for entry in command_list()}
    aliases = {"w"}  # /w is /whisper
    assert commands <= listed, f"missing from the README: {sorted(commands - listed)}"
    assert listed - aliases <= commands, f"not commands: {sorted(listed - aliases - commands)}"


def test_every_built_in_tool_is_named_in_the_readme():
    start = README.index("**Tools.**")
    paragraph = README[start : README.index("\n\n", start)]
    named = set(re.findall(r"`([a-z_]+)`", paragraph))
    assert set(tool_names()) <= named, f"missing: {sorted(set(tool_names()) - named)}"
    assert named <= set(tool_names()), f"not tools: {sorted(named - set(tool_names()))}"
