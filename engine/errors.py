"""Errors every layer may raise and the CLI turns into one line and an exit code."""

from __future__ import annotations


class BackendUnavailable(Exception):
    """A device backend (NVML, amdsmi, CUPTI) cannot start: ``reason`` says why, ``remedy``
    what to do (exit code 4)."""

    def __init__(self, backend: str, reason: str, remedy: str) -> None:
        super().__init__(f"{backend}: {reason} — {remedy}")
        self.backend, self.reason, self.remedy = backend, reason, remedy
