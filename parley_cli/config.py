"""Where the server is and which token to use: PARLEY_URL and PARLEY_TOKEN, else the config
file `parley login` writes (~/.config/parley/config.json, or PARLEY_CONFIG)."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path


class ConfigError(Exception):
    """Not configured: the message says what to do."""


@dataclass(frozen=True)
class Config:
    url: str
    token: str


def config_path() -> Path:
    custom = os.environ.get("PARLEY_CONFIG")
    if custom:
        return Path(custom)
    base = Path(os.environ.get("XDG_CONFIG_HOME") or Path.home() / ".config")
    return base / "parley" / "config.json"


def load() -> Config:
    stored: dict = {}
    path = config_path()
    if path.exists():
        try:
            stored = json.loads(path.read_text())
        except (OSError, ValueError) as exc:
            raise ConfigError(f"Cannot read {path}: {exc}. Run `parley login` again.") from None
    url = os.environ.get("PARLEY_URL") or stored.get("url") or ""
    token = os.environ.get("PARLEY_TOKEN") or stored.get("token") or ""
    if not url or not token:
        raise ConfigError(
            "Say where Parley is and which token to use: set PARLEY_URL and PARLEY_TOKEN, or "
            "run `parley login --url http://localhost:8000 --token pat_…` (make a token in "
            "Parley: account menu → API tokens)."
        )
    return Config(url=url.rstrip("/"), token=token)


def save(config: Config) -> Path:
    path = config_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"url": config.url, "token": config.token}))
    path.chmod(0o600)  # the token is a password
    return path
