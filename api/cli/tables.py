"""The CLI's tables keep ids whole: an id is what a user copies into the next command.
A table fits the terminal by leaving out its least useful columns, not by shrinking
every column to `…`."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import replace

from rich.console import Console
from rich.table import Column, Table

# An id column is never wider than this (a sub-agent's sub-agent fits), so one long id
# (a schedule's, or one a caller chose) cannot take a table's width from the other
# columns: a longer id folds onto the next line, whole, rather than being cut.
ID_WIDTH = 40


def id_column(header: str, ids: Iterable[str]) -> Column:
    """A column that shows each id uncut, however narrow the terminal; the other columns
    wrap or go instead (a cut id like `run-8a843c…` is useless). An id up to `ID_WIDTH`
    characters stays on one line; a longer one folds, whole."""
    widest = min(max((len(i) for i in ids), default=0), ID_WIDTH)
    width = max(widest, len(header))
    return Column(header, overflow="fold", min_width=width, max_width=width)


def fitted_table(
    console: Console,
    columns: Sequence[Column],
    rows: Sequence[Sequence[str]],
    optional: Sequence[str],
) -> Table:
    """A table of `rows` that fits `console`: while some cell's words would not fit whole,
    the `optional` columns (headers, the first listed goes first) are left out, and the
    caption names them."""
    left_out: list[str] = []
    while True:
        kept = [i for i, c in enumerate(columns) if c.header not in left_out]
        cells = {i: [row[i] for row in rows] for i in kept}
        widths = {i: _narrowest(columns[i], cells[i]) for i in kept}
        room = console.width - (3 * len(kept) + 1) - sum(widths.values())
        if room >= 0 or len(left_out) == len(optional):
            break
        left_out.append(optional[len(left_out)])
    for i in kept:  # what room is left widens columns, left to right, up to their longest line
        more = min(max(room, 0), _widest(columns[i], cells[i]) - widths[i])
        widths[i] += max(more, 0)
        room -= max(more, 0)
    table = Table(*(replace(columns[i].copy(), width=widths[i]) for i in kept))
    for row in rows:
        table.add_row(*(row[i] for i in kept))
    if left_out:
        table.caption = f"Left out to fit the terminal: {', '.join(left_out)}."
    return table


def _narrowest(column: Column, cells: Sequence[str]) -> int:
    """How narrow `column` can be with every word of its header and cells whole."""
    words = [w for text in (str(column.header), *cells) for w in text.split()]
    narrowest = max(column.min_width or 0, *(len(w) for w in words), 1)
    return min(narrowest, column.max_width) if column.max_width else narrowest


def _widest(column: Column, cells: Sequence[str]) -> int:
    """How wide `column` is with its header and each cell on one line (an id: `ID_WIDTH`)."""
    longest = max(len(str(column.header)), *(len(c) for c in cells), 1)
    return min(longest, column.max_width) if column.max_width else longest
