"""Migrations Django writes pass the project's format check as written (issue 34)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from django.core.management import call_command
from django.test import override_settings

RUFF = Path(sys.executable).parent / "ruff"


@pytest.mark.django_db
def test_a_generated_migration_passes_ruff_format_check(tmp_path, monkeypatch):
    package = tmp_path / "fresh_migrations"
    package.mkdir()
    (package / "__init__.py").write_text("")
    monkeypatch.syspath_prepend(str(tmp_path))
    # No migrations yet: the app's whole initial migration is generated, quotes and all.
    with override_settings(MIGRATION_MODULES={"accounts": "fresh_migrations"}):
        call_command("makemigrations", "accounts", verbosity=0)
    written = sorted(package.glob("0001_*.py"))
    assert written, "makemigrations wrote nothing"
    checked = subprocess.run(
        [str(RUFF), "format", "--check", *map(str, written)], capture_output=True, text=True
    )
    assert checked.returncode == 0, checked.stdout + checked.stderr
    linted = subprocess.run(
        [str(RUFF), "check", "--no-cache", *map(str, written)], capture_output=True, text=True
    )
    assert linted.returncode == 0, linted.stdout + linted.stderr
