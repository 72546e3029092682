"""The only module that sees encryption keys: secrets at rest are MultiFernet tokens.

PARLEY_ENCRYPTION_KEYS lists Fernet keys newest first. New data is encrypted with the first;
any listed key decrypts. Rotation: prepend a new key, run `manage.py rotate_credentials`, then
drop the old key.
"""

from __future__ import annotations

import re
from functools import lru_cache

from cryptography.fernet import Fernet, InvalidToken, MultiFernet
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured


class SecretUnreadable(Exception):
    """A stored secret cannot be decrypted with any configured key."""


@lru_cache(maxsize=4)
def _fernet(keys: tuple[str, ...]) -> MultiFernet:
    try:
        return MultiFernet([Fernet(key.encode()) for key in keys])
    except (ValueError, TypeError) as exc:
        raise ImproperlyConfigured(
            "PARLEY_ENCRYPTION_KEYS must list Fernet keys (32 url-safe base64 bytes each); "
            "make one with: python -c 'from cryptography.fernet import Fernet; "
            "print(Fernet.generate_key().decode())'"
        ) from exc


def _current() -> MultiFernet:
    return _fernet(tuple(settings.PARLEY_ENCRYPTION_KEYS))


def encrypt(plaintext: str) -> str:
    return _current().encrypt(plaintext.encode()).decode()


def decrypt(token: str) -> str:
    try:
        return _current().decrypt(token.encode()).decode()
    except InvalidToken:
        raise SecretUnreadable(
            "This saved key cannot be decrypted with the configured encryption keys."
        ) from None


def rotate(token: str) -> str:
    """Re-encrypt a token with the newest key."""
    try:
        return _current().rotate(token.encode()).decode()
    except InvalidToken:
        raise SecretUnreadable("A saved key cannot be decrypted with any configured key.") from None


def mask(last4: str) -> str:
    """How a key is shown anywhere: its last four characters, never more."""
    return f"••••{last4}" if last4 else "(no key)"


# Key-shaped strings of the providers Parley speaks to (OpenAI and compatibles, Anthropic,
# Google), for text whose key is not known to the caller: logs, a library's error.
KEY_SHAPED = re.compile(
    r"\b(?:sk-[A-Za-z0-9_\-]{12,}|AIza[0-9A-Za-z_\-]{30,}|(?:Bearer|x-api-key:?)\s+[A-Za-z0-9._\-]{16,})"
)


def scrub(text: str, *secrets: str) -> str:
    """The one scrubber for every error path: the given keys, and anything shaped like a key,
    replaced by their masked form. Whatever a provider quotes back never gets through."""
    for secret in secrets:
        if secret:
            text = text.replace(secret, mask(secret[-4:]))
    return KEY_SHAPED.sub(lambda found: mask(found.group(0)[-4:]), text)
