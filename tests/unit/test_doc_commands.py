"""Every `keel` command the README and docs show parses against the real CLI.

The commands are read from the pages' shell blocks (`tests/doc_commands.py`) and parsed
by the same click commands `keel` runs, as far as parsing goes: the command and its
subcommands exist, every option is one the command has, values have the right type and
nothing required is missing. Nothing is executed. The README's first-review commands
also run for real against the scripted model: `tests/integration/test_dev_offline.py`.
"""

from __future__ import annotations

from typing import Any

import pytest
import typer

from keel.api.cli.main import app
from tests.doc_commands import DocCommand, all_keel_commands

COMMANDS = all_keel_commands()
# Typer carries its own click; its usage errors share the base of its public BadParameter.
UsageProblem: type[Exception] = next(
    c for c in typer.BadParameter.__mro__ if c.__name__ == "ClickException"
)


def parse(args: tuple[str, ...]) -> None:
    """Parse `keel ARGS` the way `keel` would, down to the leaf command, running nothing."""
    command: Any = typer.main.get_command(app)
    ctx = command.make_context("keel", list(args))
    while hasattr(command, "resolve_command"):  # a group: its subcommand parses the rest
        protected = getattr(ctx, "protected_args", None) or getattr(ctx, "_protected_args", [])
        rest = [*protected, *ctx.args]
        if not rest:
            raise AssertionError(f"`{ctx.command_path}` needs a subcommand.")
        name, command, rest = command.resolve_command(ctx, rest)
        ctx = command.make_context(name, rest, parent=ctx)


def test_the_pages_show_keel_commands() -> None:
    pages = {command.page for command in COMMANDS}
    assert "README.md" in pages and len(pages) > 5, pages


@pytest.mark.parametrize("command", COMMANDS, ids=str)
def test_each_documented_command_parses(command: DocCommand) -> None:
    try:
        parse(command.args)
    except UsageProblem as exc:
        message = exc.format_message()  # type: ignore[attr-defined]
        pytest.fail(f"{command}\n  from: {command.line}\n  keel says: {message}")


def test_a_wrong_command_or_flag_is_caught() -> None:
    """The check can fail: a misspelt subcommand, an unknown flag, a missing argument."""
    for args in [("runz", "list"), ("review", "--agnet", "x"), ("approve", "RUN_ID")]:
        with pytest.raises(UsageProblem):
            parse(args)
