"""The storage layer's one exception type, and how driver exceptions are described in logs and messages."""

from __future__ import annotations


class StorageError(Exception):
    """Storage could not do what was asked (database unreachable, schema problem). Raised by ``open``/``load``/
    ``prune_history``/queries; never by ``append``, which reports through ``on_done``."""


def describe(e: BaseException) -> str:
    """One line: the exception type and the first line of its message (driver messages can span many lines)."""
    text = str(e).splitlines()[0] if str(e) else ""
    return f"{type(e).__name__}: {text}"[:500]
