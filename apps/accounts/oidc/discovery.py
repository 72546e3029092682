"""The issuer's discovery document (OpenID Connect Discovery 1.0), read when first needed and
kept for an hour: a provider down at start-up must not stop Parley, only its sign-in."""

from __future__ import annotations

import threading
import time

import requests
from django.conf import settings

KEEP_SECONDS = 3600
REQUIRED = ("issuer", "authorization_endpoint", "token_endpoint", "jwks_uri")


class ProviderUnavailable(Exception):
    """The discovery document could not be read, or does not describe the configured issuer."""


_lock = threading.Lock()
_cached: tuple[float, str, dict] | None = None  # (read at, issuer, document)


def document() -> dict:
    global _cached
    issuer = settings.PARLEY_OIDC_ISSUER
    with _lock:
        if _cached and _cached[1] == issuer and time.monotonic() - _cached[0] < KEEP_SECONDS:
            return _cached[2]
    found = _read(issuer)
    with _lock:
        _cached = (time.monotonic(), issuer, found)
    return found


def forget() -> None:
    """Read the document afresh next time (its keys rotated, or the tests changed issuer)."""
    global _cached
    with _lock:
        _cached = None


def endpoint(name: str) -> str:
    return document()[name]


def _read(issuer: str) -> dict:
    url = issuer.rstrip("/") + "/.well-known/openid-configuration"
    try:
        response = requests.get(url, timeout=settings.OIDC_TIMEOUT)
        response.raise_for_status()
        found = response.json()
    except (requests.RequestException, ValueError) as exc:
        raise ProviderUnavailable(f"could not read {url}: {exc}") from exc
    missing = [key for key in REQUIRED if not isinstance(found.get(key), str)]
    if missing:
        raise ProviderUnavailable(f"{url} lacks {', '.join(missing)}")
    # The spec's rule: the document must name exactly the issuer it was read from, or an
    # attacker's document could send sign-ins anywhere.
    if found["issuer"] != issuer:
        raise ProviderUnavailable(f"{url} names issuer {found['issuer']!r}, not {issuer!r}")
    return found
