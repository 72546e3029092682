"""Where user-added MCP servers may point: public addresses only, unless an admin allows more.

A URL a user types is fetched by Parley's own servers, so one naming loopback, a private
network or a link-local address (cloud metadata) could reach what the user cannot. Every
address the host name resolves to is checked, when the server is saved and before each use.
"""

from __future__ import annotations

import ipaddress
import socket
from urllib.parse import urlsplit

from django.conf import settings
from django.core.exceptions import ValidationError


def check_server_url(url: str) -> str:
    """The URL, or ValidationError saying why Parley will not call it."""
    parts = urlsplit(url.strip())
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValidationError("Give an http:// or https:// URL with a host name.")
    if settings.PARLEY_MCP_ALLOW_PRIVATE_URLS:
        return url.strip()
    try:
        infos = socket.getaddrinfo(parts.hostname, parts.port or 443, type=socket.SOCK_STREAM)
    except (socket.gaierror, UnicodeError) as exc:
        raise ValidationError(f"{parts.hostname} cannot be resolved ({exc}).") from None
    for info in infos:
        address = ipaddress.ip_address(info[4][0])
        if not address.is_global:
            raise ValidationError(
                f"{parts.hostname} points to {address}, a loopback, private or link-local "
                "address, which Parley does not call for user-added servers (an admin can "
                "allow it with PARLEY_MCP_ALLOW_PRIVATE_URLS)."
            )
    return url.strip()
