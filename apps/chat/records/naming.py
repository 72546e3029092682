"""Automatic thread names: 3-6 salient words of the first substantive message (<= 60 chars),
in Title Case, never holding a secret, a token, a long hash or more of a path than its
file name (names show in the sidebar, exports and window titles)."""

from __future__ import annotations

import re

CODE = re.compile(r"```.*?(?:```|$)|`[^`\n]*`", re.S)
# Addresses go first, whole: the path rule would keep their last part ("page", "Https").
URL = re.compile(r"\b(?:[a-z][a-z0-9+.-]*://|www\.)\S+", re.I)
NOISE = re.compile(r"(?<![\w.])@[\w-]+|[#*_>\[\]()~|]")
WORD = re.compile(r"[^\W_][\w'\u2019.-]*(?<![.-])", re.U)
# A path keeps its last part: /home/alice/secrets/prod.env -> prod.env.
PATH = re.compile(r"(?:[A-Za-z]:)?(?:~|\.{1,2})?(?:[\\/][\w.~-]+){2,}|(?:[A-Za-z]:)?[\\/][\w.~-]+")
# What follows "password:", "token=", "api key is" … is a secret, whatever it looks like.
LABELLED_SECRET = re.compile(
    r"\b(?:password|passwd|passphrase|secret|token|api[ _-]?key|key)\s*(?:[:=]|is)\s*\S+", re.I
)
KNOWN_TOKEN = re.compile(
    r"\b(?:sk|pk|rk|ghp|gho|ghs|github_pat|xox[abprs]|AKIA|ASIA|AIza|glpat|eyJ)[-_A-Za-z0-9.]{6,}"
)
SMALL_WORDS = frozenset(
    [
        "a",
        "an",
        "and",
        "as",
        "at",
        "but",
        "by",
        "for",
        "in",
        "nor",
        "of",
        "on",
        "or",
        "the",
        "to",
        "vs",
        "via",
    ]
)
_STOPWORD_TEXT = """
    a about above after again all also am an and any are as at be because been before being
    below between both but by can could did do does doing down during each few for from further
    had has have having he her here hers him his how i if in into is it its itself just let me
    more most my no nor not now of off on once only or other our ours out over own please same
    she should so some such than that the their them then there these they this those through
    to too under until up very was we were what when where which while who whom why will with
    would you your yours hi hello hey thanks thank ok okay yes yeah sure think tell give make
    want need know like get got let's lets us can't don't i'm it's what's"""
STOPWORDS = frozenset(_STOPWORD_TEXT.split())
MAX_CHARS = 60


def _secret_like(word: str) -> bool:
    """A long hash, key or token: long, and mixing digits with letters (or all hex)."""
    bare = word.replace("-", "").replace("_", "").replace(".", "")
    if len(bare) >= 12 and re.fullmatch(r"[0-9a-fA-F]+", bare) and re.search(r"\d", bare):
        return True
    return len(bare) >= 20 and bool(re.search(r"\d", bare)) and bool(re.search(r"[A-Za-z]", bare))


def salient_words(text: str) -> list[str]:
    text = URL.sub(" ", CODE.sub(" ", text))
    text = KNOWN_TOKEN.sub(" ", LABELLED_SECRET.sub(" ", text))
    text = PATH.sub(lambda match: " " + re.split(r"[\\/]", match.group(0))[-1] + " ", text)
    text = NOISE.sub(" ", text)
    return [
        w
        for w in WORD.findall(text)
        if w.lower() not in STOPWORDS and len(w) > 1 and not _secret_like(w)
    ]


def title_case(words: list[str]) -> str:
    """Capitalise each word (small words inside stay small); file names, acronyms and words
    with capitals inside (iOS, GPT-4) are left as they are."""
    out = []
    for index, word in enumerate(words):
        keep = "." in word or any(c.isupper() for c in word[1:]) or word.isupper()
        if keep:
            out.append(word)
        elif index and word.lower() in SMALL_WORDS:
            out.append(word.lower())
        else:
            out.append(word[0].upper() + word[1:])
    return " ".join(out)


def thread_name(text: str) -> str:
    """A short name, or "" when the message has too little substance (e.g. "hi")."""
    words = salient_words(text)
    if len(words) < 2:
        return ""
    chosen: list[str] = []
    for word in words[:6]:
        if len(" ".join([*chosen, word])) > MAX_CHARS:
            break
        chosen.append(word)
    if len(chosen) < 2:
        return title_case([words[0][:MAX_CHARS]])
    return title_case(chosen)


def unique_name(name: str, taken: set[str]) -> str:
    if name not in taken:
        return name
    for number in range(2, 1000):
        suffix = f" {number}"
        candidate = name[: MAX_CHARS - len(suffix)].rstrip() + suffix
        if candidate not in taken:
            return candidate
    return name


BRANCH_PREFIX = re.compile(r"^Branch \d+ · ")


def branch_name(parent_label: str, taken: set[str]) -> str:
    """ "Branch 2 · Harbour Sequence": the number first, so branches of one thread differ where
    a narrow sidebar still shows them (a branch of a branch counts on from its root name)."""
    base = BRANCH_PREFIX.sub("", parent_label or "") or "Untitled chat"
    for number in range(1, 1000):
        prefix = f"Branch {number} · "
        candidate = prefix + base[: MAX_CHARS - len(prefix)].rstrip()
        if candidate not in taken:
            return candidate
    return unique_name(f"Branch · {base}", taken)
