"""The signal that a dry run is done (kept apart so the command line imports it for free)."""

from __future__ import annotations

__all__ = ["DryRunFinished"]


class DryRunFinished(Exception):
    """Raised when a dry run has counted what it would spend; ``text`` says it (exit status 0)."""

    def __init__(self, text: str) -> None:
        super().__init__(text)
        self.text = text
