"""Generated workspaces for long reviews: many Python files, some lines marked `# BUG:`.

Deterministic for a given size, so the tests and the benchmark review the same code.
Every seventh file holds a bug marker; every fortieth file is four times the usual
size, larger than a small window lets one tool output be, so reading it takes pages.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["GeneratedWorkspace", "generate_workspace"]

FILES_PER_PACKAGE = 20
BUG_EVERY = 7
LARGE_EVERY = 40


@dataclass
class GeneratedWorkspace:
    """What was written: the files, their bytes, and the planted findings."""

    root: Path
    files: list[str] = field(default_factory=list)
    total_bytes: int = 0
    bugs: dict[str, tuple[int, str]] = field(default_factory=dict)
    """path -> (line, text) of its `# BUG:` marker."""


def generate_workspace(
    root: Path, *, total_bytes: int, file_bytes: int = 9_000
) -> GeneratedWorkspace:
    """Write Python files under `root` until about `total_bytes` are written."""
    out = GeneratedWorkspace(root=root)
    index = 0
    while out.total_bytes < total_bytes:
        package = f"pkg_{index // FILES_PER_PACKAGE:02d}"
        rel = f"{package}/module_{index:04d}.py"
        size = file_bytes * (4 if index % LARGE_EVERY == LARGE_EVERY - 1 else 1)
        text, bug = _module(index, size)
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        out.files.append(rel)
        out.total_bytes += len(text.encode())
        if bug is not None:
            out.bugs[rel] = bug
        index += 1
    return out


def _module(index: int, size: int) -> tuple[str, tuple[int, str] | None]:
    lines = [f'"""Module {index}: generated for a long review."""', "", "import os", ""]
    bug: tuple[int, str] | None = None
    bug_at = 12 + (index * 13) % 60 if index % BUG_EVERY == 0 else None
    function = 0
    while sum(len(line) + 1 for line in lines) < size:
        lines += [
            f"def handler_{index}_{function}(request, limit={function + 3}):",
            f'    """Handle request kind {function} of module {index}."""',
            "    total = 0",
            "    for item in request.items[:limit]:",
            "        total += item.weight * 2",
            f"    return {{'module': {index}, 'total': total, 'kind': {function}}}",
            "",
        ]
        if bug_at is not None and bug is None and len(lines) >= bug_at:
            text = f"handler_{index}_{function} trusts request.path without normalising it"
            lines.append(f"PATH_{function} = os.path.join('/srv', 'data')  # BUG: {text}")
            bug = (len(lines), text)
            lines.append("")
        function += 1
    return "\n".join(lines) + "\n", bug
