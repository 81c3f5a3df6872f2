"""The one error type importers raise: it names the file and says what is wrong, in one line."""

from __future__ import annotations

from pathlib import Path


class TraceImportError(Exception):
    """A trace file cannot be imported; ``str(e)`` is the line the user sees."""

    def __init__(self, path: str | Path, problem: str) -> None:
        super().__init__(f"{path}: {problem}")
        self.path = str(path)
        self.problem = problem
