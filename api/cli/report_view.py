"""A report in the terminal: Markdown for people, file names shown literally, findings as a table.

Markdown reads `__init__.py` as bold `init.py`, so paths and `__dunder__` names outside
code are made inline code before rendering: a file name is code, never emphasis. The
machine-readable `findings` block (docs/findings.md) is shown as a table, not raw JSON.
Every cell is plain `Text`, so nothing the model wrote is read as console markup.
"""

from __future__ import annotations

import json
import re

from rich.console import Group, RenderableType
from rich.markdown import Markdown
from rich.table import Table
from rich.text import Text

__all__ = ["findings_table", "literal_paths", "report_view"]

# A path with an underscore (`src/__init__.py`, `CODE_OF_CONDUCT.md`, `a_b/c`) or a
# `__dunder__` name, standing alone: not part of a longer word, path or link.
PATH_LIKE = re.compile(
    r"(?<![\w./\\`\[<-])(?<!\]\()(?=[\w./-]*_)"
    r"(?:(?:[\w.-]+/)+[\w.-]*\w|[\w.-]*\w\.[A-Za-z]\w*|__\w+__)"
    r"(?![\w`\]>])"
)
FENCE = re.compile(r"^ {0,3}(```|~~~)")
CODE_SPAN = re.compile(r"(`+)[^`]*?\1")
# The findings block, as `keel.workflows.run.findings` reads it.
FINDINGS_FENCE = re.compile(
    r"^ {0,3}```findings[ \t]*\r?\n(.*?)^ {0,3}```[ \t]*$", re.MULTILINE | re.DOTALL
)


def literal_paths(markdown: str) -> str:
    """The Markdown with each path or dunder name outside code wrapped as inline code."""
    out: list[str] = []
    fence: str | None = None
    for line in markdown.split("\n"):
        opened = FENCE.match(line)
        if fence is not None:
            if opened and opened.group(1) == fence:
                fence = None
            out.append(line)
            continue
        if opened:
            fence = opened.group(1)
            out.append(line)
            continue
        out.append(_outside_code(line))
    return "\n".join(out)


def _outside_code(line: str) -> str:
    parts: list[str] = []
    last = 0
    for span in CODE_SPAN.finditer(line):
        parts.append(PATH_LIKE.sub(lambda m: f"`{m.group(0)}`", line[last : span.start()]))
        parts.append(span.group(0))
        last = span.end()
    parts.append(PATH_LIKE.sub(lambda m: f"`{m.group(0)}`", line[last:]))
    return "".join(parts)


def findings_table(body: str) -> RenderableType:
    """A findings block's JSON as a table; the text as it is when it is not findings."""
    try:
        data = json.loads(body)
    except ValueError:
        return Markdown(f"```\n{body}\n```")
    if isinstance(data, dict) and isinstance(data.get("findings"), list):
        data = data["findings"]
    if not isinstance(data, list) or not all(isinstance(item, dict) for item in data):
        return Markdown(f"```\n{body}\n```")
    if not data:
        return Text("Findings: none.")
    table = Table("severity", "place", "finding", title="Findings", title_justify="left")
    for item in data:
        place = str(item.get("file", ""))
        if item.get("line") is not None:
            place += f":{item['line']}"
        title = str(item.get("title", ""))
        detail = str(item.get("detail", "") or "")
        cell = Text(title, style="bold")
        if detail:
            cell.append("\n" + detail, style="")
        if item.get("verified") is False:
            cell.append("\n(unverified: no run of the tree read this place)", style="dim")
        table.add_row(Text(str(item.get("severity", ""))), Text(place), cell)
    return table


def report_view(report: str) -> RenderableType:
    """The report as the terminal shows it: Markdown, with each findings block as a table."""
    parts: list[RenderableType] = []
    last = 0
    for block in FINDINGS_FENCE.finditer(report):
        before = report[last : block.start()]
        if before.strip():
            parts.append(Markdown(literal_paths(before)))
        parts.append(findings_table(block.group(1)))
        last = block.end()
    rest = report[last:]
    if rest.strip():
        parts.append(Markdown(literal_paths(rest)))
    return Group(*parts)
