"""Typed readers for environment variables that refuse malformed values at start-up."""

from __future__ import annotations

import json
import os
import secrets
from pathlib import Path

from django.core.exceptions import ImproperlyConfigured

TRUE_VALUES = {"1", "true", "yes", "on"}
FALSE_VALUES = {"0", "false", "no", "off", ""}


def env_str(name: str, default: str = "") -> str:
    """Return the variable as a stripped string, or ``default`` when it is unset."""
    return os.environ.get(name, default).strip()


def env_bool(name: str, default: bool = False) -> bool:
    """Return a boolean; anything but the usual spellings of true/false is an error."""
    raw = os.environ.get(name)
    if raw is None:
        return default
    value = raw.strip().lower()
    if value in TRUE_VALUES:
        return True
    if value in FALSE_VALUES:
        return False
    raise ImproperlyConfigured(f"{name}={raw!r} is not a boolean: use true/false, 1/0, yes/no.")


def env_int(name: str, default: int, *, minimum: int | None = None) -> int:
    """Return an integer, refusing non-numbers and values below ``minimum``."""
    raw = os.environ.get(name)
    if raw is None or not raw.strip():
        return default
    try:
        value = int(raw.strip())
    except ValueError:
        raise ImproperlyConfigured(f"{name}={raw!r} is not an integer.") from None
    if minimum is not None and value < minimum:
        raise ImproperlyConfigured(f"{name}={value} must be at least {minimum}.")
    return value


def env_list(name: str, default: list[str]) -> list[str]:
    """Return a comma-separated list with blanks dropped."""
    raw = os.environ.get(name)
    if raw is None:
        return list(default)
    return [item.strip() for item in raw.split(",") if item.strip()]


def env_redis_url(name: str, default: str) -> str:
    """Return a redis:// or rediss:// URL."""
    value = env_str(name, default)
    if not value.startswith(("redis://", "rediss://", "unix://")):
        raise ImproperlyConfigured(
            f"{name}={value!r} is not a Redis URL (expected redis://host:port/db)."
        )
    return value


def local_secrets(path: Path) -> dict[str, str]:
    """Read development secrets from ``path``, generating them on first use.

    Only consulted for values missing from the environment, so ``make run`` keeps logins and
    encrypted data valid across restarts without asking anybody to invent a key.
    """
    from cryptography.fernet import Fernet

    path.parent.mkdir(parents=True, exist_ok=True)
    fresh = {
        "SECRET_KEY": secrets.token_urlsafe(50),
        "PARLEY_ENCRYPTION_KEYS": Fernet.generate_key().decode(),
    }
    if not path.exists():
        # Write aside, then link into place: the link fails if another process won the race,
        # and nobody ever reads a half-written file.
        scratch = path.with_name(f".{path.name}.{os.getpid()}")
        scratch.write_text(json.dumps(fresh, indent=2))
        scratch.chmod(0o600)
        try:
            os.link(scratch, path)
        except FileExistsError:
            pass
        finally:
            scratch.unlink()
    try:
        stored = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise ImproperlyConfigured(
            f"{path} is unreadable ({exc}); delete it to regenerate."
        ) from exc
    return {**fresh, **stored}
