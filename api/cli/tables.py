"""The CLI's tables keep ids whole: an id is what a user copies into the next command."""

from __future__ import annotations

from collections.abc import Iterable

from rich.table import Column


def id_column(header: str, ids: Iterable[str]) -> Column:
    """A column that shows each id on one line, uncut, however narrow the terminal;
    the other columns wrap or shorten instead (a cut id like `run-8a843c…` is useless)."""
    widest = max((len(i) for i in ids), default=0)
    return Column(header, no_wrap=True, min_width=max(widest, len(header)))
