"""List prices per model family, for the cost counter only (nothing is billed or limited by them)."""

from __future__ import annotations

# USD per million (input, output) tokens; list prices as of 2025, the Claude 4.5+ rows from third-party
# listings in 2026-11 (the vendors' pages are not reachable from here). Unknown models count tokens at zero
# cost; pass `price_per_mtok=` to the client to override.
PRICES: dict[str, tuple[float, float]] = {
    "deepseek-coder": (0.27, 1.10),
    "deepseek-chat": (0.27, 1.10),
    "deepseek-reasoner": (0.55, 2.19),
    "gpt-4o": (2.50, 10.00),
    "gpt-4o-mini": (0.15, 0.60),
    "gpt-4.1": (2.00, 8.00),
    "gpt-4.1-mini": (0.40, 1.60),
    "claude-3-5-sonnet": (3.00, 15.00),
    "claude-3-5-haiku": (0.80, 4.00),
    "claude-sonnet-4": (3.00, 15.00),
    "claude-haiku-4-5": (1.00, 5.00),
    "claude-opus-4": (15.00, 75.00),  # Opus 4 and 4.1; from 4.5 on the price dropped
    "claude-opus-4-5": (5.00, 25.00),
    "claude-opus-4-6": (5.00, 25.00),
    "claude-opus-4-7": (5.00, 25.00),
    "claude-opus-4-8": (5.00, 25.00),
}


def price_for(model: str) -> tuple[float, float]:
    """Longest price-table prefix of the model name (dated snapshots share their family's price)."""
    best = ""
    for name in PRICES:
        if model.startswith(name) and len(name) > len(best):
            best = name
    return PRICES.get(best, (0.0, 0.0))
