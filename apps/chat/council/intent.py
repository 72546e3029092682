"""Format by intent: what shape of answer a message asks for — a list, a comparison, an
explanation, code or a short answer — told apart by rules (no model call, nothing added to a
reply's wait); a message the rules are unsure of gets no format rule. The rule goes in the
reply's final instruction, after the cached prefix, so roles still share the cache."""

from __future__ import annotations

import re

FORMAT_RULES = {
    "list": "The person asks for several items: answer as a short bulleted list, one line each.",
    "comparison": "The person asks for a comparison: answer with a compact Markdown table "
    "(one row per option, one column per criterion), then one line saying which you prefer.",
    "explanation": "The person asks for an explanation: a short answer first, then the "
    "reasoning in a few short paragraphs; no bullet lists unless steps are needed.",
    "code": "The person asks for code: give it in one fenced block with its language, then "
    "at most three lines about how to use it.",
    "short": "The person asks a short question: answer in one or two sentences.",
}

_CODE = re.compile(
    r"```|\b(code|function|script|snippet|regex|sql|python|javascript|typescript|bash|"
    r"implement|refactor|class|method|compile|stack ?trace)\b",
    re.I,
)
_COMPARISON = re.compile(
    r"\b(compare|comparison|versus|vs\.?|difference between|differences between|which is "
    r"better|pros and cons|trade-?offs?)\b",
    re.I,
)
_LIST = re.compile(
    r"\b(list|ideas|options|suggestions|examples|brainstorm|steps|ways to|give me \d+|"
    r"\d+ (ideas|ways|options|names|titles)|what are some)\b",
    re.I,
)
_EXPLANATION = re.compile(r"\b(why|explain|how does|how do|what causes|reason)\b", re.I)
_SHORT = re.compile(
    r"^(who|when|where|which|is|are|was|were|does|do|did|can|could|should|will|how many|"
    r"how much|what is|what's)\b",
    re.I,
)


def intent_of(text: str) -> str:
    """The shape of answer a message asks for, or "" when the rules are not sure."""
    text = " ".join(text.split())
    without_mentions = re.sub(r"@[\w-]+", "", text).strip()
    if _CODE.search(text):
        return "code"
    if _COMPARISON.search(text):
        return "comparison"
    if _LIST.search(text):
        return "list"
    if _EXPLANATION.search(without_mentions):
        return "explanation"
    if (
        without_mentions.endswith("?")
        and len(without_mentions.split()) <= 12
        and _SHORT.match(without_mentions)
    ):
        return "short"
    return ""


def format_rule(intent: str) -> str:
    return FORMAT_RULES.get(intent, "")
