"""The CLI's report view: file names literally, the findings block as a table, markup inert."""

from __future__ import annotations

from rich.console import Console

from keel.api.cli.report_view import literal_paths, report_view

REPORT = (
    "# Review of src/requests/__init__.py\n\n"
    "Read __init__.py, CODE_OF_CONDUCT.md and [docs](https://x.example/a_b.html); "
    "`__main__.py` stays code and **bold** stays bold. The __all__ list is set.\n\n"
    "```python\ndef __init__(self): ...\n```\n\n"
    "```findings\n"
    '[{"file": "src/requests/__init__.py", "line": 3, "severity": "high",'
    ' "title": "[bold red]markup[/] stays text", "detail": "Fix __x__."}]\n'
    "```\n"
)


def shown(report: str) -> str:
    console = Console(width=120, record=True, color_system=None)
    console.print(report_view(report))
    return console.export_text()


def test_file_names_and_dunder_names_render_literally() -> None:
    text = shown(REPORT)
    for name in ("src/requests/__init__.py", "__init__.py,", "CODE_OF_CONDUCT.md", "__all__"):
        assert name in text, text
    assert "init.py" not in text.replace("__init__.py", "")
    assert "def __init__(self)" in text  # code blocks are left as written


def test_the_findings_block_is_a_table_and_its_text_is_inert() -> None:
    text = shown(REPORT)
    assert '"severity"' not in text and "```" not in text
    row = next(line for line in text.splitlines() if "src/requests/__init__.py:3" in line)
    assert "high" in row and "[bold red]markup[/] stays text" in row
    assert "Fix __x__." in text


def test_only_names_outside_code_and_links_become_code() -> None:
    assert literal_paths("see a_b/c.py.") == "see `a_b/c.py`."
    assert literal_paths("`a_b.py` and [x](a_b/c_d.py)") == "`a_b.py` and [x](a_b/c_d.py)"
    assert literal_paths("snake_case and e.g. this") == "snake_case and e.g. this"
    assert literal_paths("```\n__init__.py\n```") == "```\n__init__.py\n```"


def test_a_block_that_is_not_findings_is_shown_as_written() -> None:
    text = shown("```findings\nnot json at all\n```\n")
    assert "not json at all" in text
    assert "none" in shown("```findings\n[]\n```\n")
