"""A trial's framework output (torch, Inductor, Triton and other libraries' logging, and Python
warnings) written to the run folder instead of the terminal.

A lever such as ``torch.compile`` that fails inside Inductor makes torch log its tracebacks —
170 lines on the operator's terminal for one failed lever. During a trial those records go to
``logs/<intervention>.log`` in the run folder; the loop's note then names the file and its line
count, so the terminal gets one line per failed lever. What a library prints straight to the
process's file descriptors (not through ``logging`` or ``warnings``) is not caught here.
"""

from __future__ import annotations

import contextlib
import logging
import warnings
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

#: the logger namespaces whose records a trial captures
FRAMEWORKS = ("torch", "triton", "onnxruntime", "transformers")


@dataclass
class CapturedLog:
    """What a trial's framework output came to: the file (relative to the run folder) and how
    many records it holds (0: the file was not written)."""

    path: Path
    rel: str
    lines: int = 0
    _file: Any = field(default=None, repr=False)

    def write(self, text: str) -> None:
        if self._file is None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._file = self.path.open("a", encoding="utf-8", errors="replace")
        self._file.write(text if text.endswith("\n") else text + "\n")
        self._file.flush()
        self.lines += text.count("\n") + (not text.endswith("\n"))

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None


class _ToCapture(logging.Handler):
    def __init__(self, log: CapturedLog) -> None:
        super().__init__(logging.INFO)  # torch's DEBUG records are its own tracing
        self.log = log
        self.setFormatter(logging.Formatter("%(asctime)s %(name)s %(levelname)s %(message)s"))

    def emit(self, record: logging.LogRecord) -> None:
        try:
            self.log.write(self.format(record))
        except Exception:
            self.handleError(record)


@contextlib.contextmanager
def framework_output(run_dir: Path, name: str) -> Iterator[CapturedLog]:
    """Within the block, records of the ``FRAMEWORKS`` loggers and warnings go to
    ``run_dir/logs/<name>.log``; every logger is put back as it was after."""
    log = CapturedLog(run_dir / "logs" / f"{name}.log", f"logs/{name}.log")
    handler = _ToCapture(log)
    manager = logging.Logger.manager
    saved: list[tuple[logging.Logger, list[logging.Handler], bool]] = []
    names = [
        n
        for n, lg in list(manager.loggerDict.items())
        if isinstance(lg, logging.Logger)
        and n.split(".")[0] in FRAMEWORKS
        and "__trace" not in n  # structured traces for tlparse, not messages for a person
    ]
    for n in sorted(set(names) | set(FRAMEWORKS)):
        lg = logging.getLogger(n)
        top = "." not in n
        if not top and not lg.handlers:
            continue  # propagates to its top-level logger, which is captured
        saved.append((lg, list(lg.handlers), lg.propagate))
        lg.handlers = [handler]
        lg.propagate = False

    def show(
        message: Warning | str,
        category: type[Warning],
        filename: str,
        lineno: int,
        file: Any = None,
        line: str | None = None,
    ) -> None:
        log.write(warnings.formatwarning(message, category, filename, lineno, line))

    old_show = warnings.showwarning
    warnings.showwarning = show
    try:
        yield log
    finally:
        warnings.showwarning = old_show
        for lg, handlers, propagate in saved:
            lg.handlers = handlers
            lg.propagate = propagate
        log.close()
