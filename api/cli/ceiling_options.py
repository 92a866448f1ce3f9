"""`--max-tokens` and `--max-cost`: the ceilings a user sets on a run's whole tree.

`keel review`, `keel run` and `keel schedules create` take them alike. The cost is
read here, so "a lot" or "$5" is refused with a sentence naming the flag rather than
a parser's usage box; its range is the request's to check (`RunCreate`).
"""

from __future__ import annotations

from typing import Annotated

import typer

from keel.api.cli.command_errors import fail

MaxTokens = Annotated[
    int | None,
    typer.Option(
        "--max-tokens",
        help="A ceiling on the tokens of the run and its sub-agents; reached, the run stops "
        "with stop reason budget (a review ends partial and says which files it missed).",
    ),
]
MaxCost = Annotated[
    str | None,
    typer.Option(
        "--max-cost",
        metavar="USD",
        help="A ceiling in US dollars on the model calls of the run and its sub-agents, by "
        "the price table (KEEL_PRICES); reached, the run stops with stop reason budget.",
    ),
]
CEILING_FLAGS = {"max_total_tokens": "--max-tokens", "max_cost_usd": "--max-cost"}


def cost_usd(given: str | None) -> float | None:
    """`--max-cost` as a number of dollars, or exit 1 saying what was typed."""
    if given is None:
        return None
    try:
        value = float(given.strip())
    except ValueError:
        raise fail(
            f"--max-cost: '{given}' is not a number; give US dollars, such as 0.50."
        ) from None
    if value != value or value in (float("inf"), float("-inf")):
        raise fail(f"--max-cost: '{given}' is not a number; give US dollars, such as 0.50.")
    return value
