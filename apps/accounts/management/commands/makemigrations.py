"""`makemigrations` whose files pass the project's linters as written: Django formats new
migrations with black only, so each file it writes is formatted (and its imports sorted) with
ruff, the project's formatter. (Any app's command of this name overrides Django's own.)"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from django.core.management.commands import makemigrations

RUFF = Path(sys.executable).parent / "ruff"


def format_written(paths: list[str]) -> None:
    """Format migration files as `make format` would; a missing ruff is said, not hidden."""
    if not paths:
        return
    if not RUFF.exists():
        raise FileNotFoundError(f"{RUFF} is missing: run `make setup` to format migrations.")
    subprocess.run([str(RUFF), "check", "--fix", "--quiet", *paths], check=False)
    subprocess.run([str(RUFF), "format", "--quiet", *paths], check=True)


class Command(makemigrations.Command):
    def write_migration_files(self, changes, update_previous_migration_paths=None):
        super().write_migration_files(changes, update_previous_migration_paths)
        if not self.dry_run:
            written = getattr(self, "written_files", [])  # set by Django's handle()
            format_written([path for path in written if path.endswith(".py")])
