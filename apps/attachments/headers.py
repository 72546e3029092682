"""The one way a download is named: a Content-Disposition header built from any file name a
person, a model or an export chose, which no name can break out of."""

from __future__ import annotations

import re
import unicodedata
from urllib.parse import quote

# What the plain `filename="…"` fallback keeps; everything else (quotes, backslashes,
# semicolons, non-ASCII) becomes "_" there, and the exact name goes in `filename*`.
PLAIN = re.compile(r"[^A-Za-z0-9 ._()\[\]+,=@-]")
MAX_NAME_CHARS = 200


def content_disposition(filename: str, *, inline: bool = False) -> str:
    """`attachment` (or `inline`) with the name twice, as RFC 6266 says: `filename*` in
    UTF-8, percent-encoded, and an ASCII `filename` for old clients. Control and format
    characters and path separators are dropped first."""
    name = (
        "".join(
            ch for ch in filename if unicodedata.category(ch)[0] != "C" and ch not in "/\\"
        ).strip()[:MAX_NAME_CHARS]
        or "download"
    )
    plain = PLAIN.sub("_", name)
    kind = "inline" if inline else "attachment"
    return f"{kind}; filename=\"{plain}\"; filename*=UTF-8''{quote(name, safe='')}"
