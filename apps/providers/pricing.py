"""Usage into money: the price table (editable in admin) applied to token counts."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from decimal import ROUND_HALF_UP, Decimal
from functools import cached_property

from apps.providers.models import ModelPrice

MILLION = Decimal(1_000_000)
ZERO = Decimal(0)


@dataclass(frozen=True)
class Price:
    input: Decimal
    output: Decimal
    cache_read: Decimal
    cache_write: Decimal


@dataclass(frozen=True)
class Cost:
    amount: Decimal  # what the tokens cost
    cache_saved: Decimal  # what they would have cost more without the cache (net of writes)


class PriceTable:
    """Every price, read on first use and then kept; `price` finds a model's by exact name,
    else longest prefix. One table serves a whole push or page (each figure it prices)."""

    @cached_property
    def _prices(self) -> dict[str, list[tuple[str, Price]]]:
        # Plain tuples: read on every settled reply and counts push, model instances cost more
        # than the query.
        rows = ModelPrice.objects.values_list(
            "provider", "model", "input_per_mtok", "output_per_mtok", "cache_read_per_mtok",
            "cache_write_per_mtok",
        )  # fmt: skip
        prices: dict[str, list[tuple[str, Price]]] = {}
        for provider, model, *per_mtok in rows:
            prices.setdefault(provider, []).append((model, Price(*per_mtok)))
        for entries in prices.values():
            entries.sort(key=lambda entry: -len(entry[0]))
        return prices

    def price(self, provider: str, model: str) -> Price | None:
        for name, price in self._prices.get(provider, []):
            if model == name or model.startswith(name):
                return price
        return None

    @staticmethod
    def one_hour_extra(price: Price) -> Decimal:
        """What a 1-hour cache write costs per token beyond a 5-minute one."""
        return ONE_HOUR_WRITE * price.input - price.cache_write

    def cost(self, provider: str, model: str, usage: Mapping) -> Cost | None:
        """What a reply's (or a sum of replies') usage cost; None when the model has no price."""
        price = self.price(provider, model)
        if price is None:
            return None
        tokens = {key: Decimal(int(usage.get(key) or 0)) for key in USAGE_KEYS}
        amount = (
            tokens["input"] * price.input
            + tokens["output"] * price.output
            + tokens["cache_read"] * price.cache_read
            + tokens["cache_write"] * price.cache_write
            + tokens["cache_write_1h"] * self.one_hour_extra(price)
        ) / MILLION
        saved = (
            tokens["cache_read"] * (price.input - price.cache_read)
            - tokens["cache_write"] * (price.cache_write - price.input)
            - tokens["cache_write_1h"] * self.one_hour_extra(price)
        ) / MILLION
        return Cost(amount, saved)


USAGE_KEYS = ("input", "output", "cache_read", "cache_write", "cache_write_1h")
ONE_HOUR_WRITE = 2  # Anthropic bills a 1-hour cache write at twice the input price


def format_money(amount: Decimal | None) -> str:
    """$0.0123 for small sums (a reply costs fractions of a cent), $12.35 for larger ones."""
    if amount is None:
        return "\N{EN DASH}"
    sign = "\N{MINUS SIGN}" if amount < 0 else ""
    amount = abs(amount)
    places = Decimal("0.01") if amount >= 1 else Decimal("0.0001")
    rounded = amount.quantize(places, rounding=ROUND_HALF_UP)
    return f"{sign}${rounded:,}"
