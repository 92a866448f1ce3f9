"""The directory an agent's tools may touch, and the check that keeps them inside it."""

from __future__ import annotations

from pathlib import Path

__all__ = ["PathEscapeError", "Workspace"]


class PathEscapeError(ValueError):
    """A path from the model that points outside the workspace or is not a usable path.

    Retrying the same path cannot help; the model must choose another one.
    """


class Workspace:
    """A root directory; every path a tool uses is resolved against it and kept under it."""

    def __init__(self, root: Path) -> None:
        resolved = Path(root).resolve()
        if not resolved.is_dir():
            raise ValueError(
                f"Workspace root '{root}' is not an existing directory; create it first."
            )
        self.root = resolved

    def resolve(self, relative: str) -> Path:
        """The real path of `relative` (symlinks followed), refusing anything outside the root."""
        if "\0" in relative:
            raise PathEscapeError(
                f"Path {relative!r} contains a NUL byte; "
                "use a plain path relative to the workspace root."
            )
        try:
            resolved = (self.root / relative).resolve(strict=False)
        except RuntimeError:  # Python 3.11 reports a symlink loop this way.
            raise PathEscapeError(
                f"Path '{relative}' is a loop of symbolic links; use another path."
            ) from None
        if not resolved.is_relative_to(self.root):
            raise _outside(relative)
        return resolved

    def relative(self, path: Path) -> str:
        """`path` as a posix path relative to the root, or "." for the root itself."""
        try:
            return path.relative_to(self.root).as_posix()
        except ValueError:
            raise _outside(str(path)) from None


def _outside(path: str) -> PathEscapeError:
    return PathEscapeError(
        f"Path '{path}' is outside the workspace; use a path relative to the workspace root."
    )
