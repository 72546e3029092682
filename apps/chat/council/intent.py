"""Format by intent: what shape of answer a message asks for — a list, a comparison, an
explanation, code or a short answer — told apart by rules first (no model call). A request or
question the rules are unsure of is put to the provider's cheap model once per turn (every
role of the turn waits for that one answer, at most a couple of seconds; without one, no
rule). The rule goes in the reply's final instruction, after the cached prefix, so roles
still share the cache. A role with output rules of its own keeps them: the format rule is
added and says the role's rules win where the two differ."""

from __future__ import annotations

import asyncio
import logging
import re
from dataclasses import replace

from apps.chat import livestate
from apps.chat.council.summaries import written_text
from apps.providers.registry import describe
from apps.providers.tools_first import with_instruction
from apps.providers.types import NO_AUTH, Auth, ChatMessage, ChatRequest, ProviderError

logger = logging.getLogger(__name__)
ASK_WAIT_SECONDS = 2.5  # the most a reply waits for the cheap model's answer
CLASSIFY_PROMPT = (
    "Classify the shape of answer this message asks for. Reply with one word: list, "
    "comparison, explanation, code, short, or none.\n\nMessage: {text}"
)

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


# Said after the format rule when the role has output rules of its own (every shipped role
# has): both apply, and where they differ — a word limit, a bullet count — the role's win.
ROLE_RULES_WIN = "Keep to your own output rules as well; where they differ, yours win."


def format_rule(intent: str, *, role_has_rules: bool = False) -> str:
    rule = FORMAT_RULES.get(intent, "")
    return f"{rule} {ROLE_RULES_WIN}" if rule and role_has_rules else rule


def worth_asking(text: str) -> bool:
    """A message the rules are unsure of but that asks for something: a question or a
    request of some length (a remark or a one-word reply gets no rule, and no call)."""
    words = re.sub(r"@[\w-]+", "", " ".join(text.split())).strip()
    return len(words.split()) >= 5 and (
        words.endswith("?")
        or bool(
            re.match(r"^(tell|show|help|describe|write|make|draft|plan|walk|give)\b", words, re.I)
        )
    )


async def intent_from_model(
    *, turn_id: int, text: str, adapter, api_key: str, base_url: str, redis,
    auth: Auth = NO_AUTH,
) -> str:  # fmt: skip
    """The cheap model's reading of a message the rules were unsure of: asked once per turn,
    the other roles of the turn read the stored answer; "" when it does not say in time."""
    key = f"{livestate.PREFIX}:intent:{turn_id}"
    if await redis.set(f"{key}:asked", "1", nx=True, ex=3600):
        request = ChatRequest(
            model=describe(adapter.kind).cheap_model,
            system=(),
            messages=(
                ChatMessage(
                    "user", ({"type": "text", "text": CLASSIFY_PROMPT.format(text=text[:2000])},)
                ),
            ),
            max_tokens=5,
        )
        try:
            answer, _ = await asyncio.wait_for(
                written_text(adapter, request, api_key=api_key, base_url=base_url, auth=auth),
                ASK_WAIT_SECONDS,
            )
        except (ProviderError, TimeoutError) as exc:
            logger.info("The cheap model did not classify turn %s: %s", turn_id, exc)
            answer = ""
        words = re.findall(r"[a-z]+", answer.lower())
        intent = words[0] if words and words[0] in FORMAT_RULES else "none"
        await redis.set(key, intent, ex=3600)
        return "" if intent == "none" else intent
    loop = asyncio.get_running_loop()
    deadline = loop.time() + ASK_WAIT_SECONDS + 0.5
    while loop.time() < deadline:
        stored = await redis.get(key)
        if stored is not None:
            intent = stored.decode() if isinstance(stored, bytes) else stored
            return "" if intent == "none" else intent
        await asyncio.sleep(0.1)
    return ""


def with_format_rule(request: ChatRequest, intent: str) -> ChatRequest:
    """The request with the intent's format rule added to the role's final instruction."""
    messages = list(request.messages)
    rule = format_rule(intent, role_has_rules=bool(request.metadata.get("role_rules")))
    messages[-1] = with_instruction(messages[-1], rule)
    return replace(
        request, messages=tuple(messages), metadata={**request.metadata, "format": intent}
    )
