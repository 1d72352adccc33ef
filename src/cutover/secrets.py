"""Secrets from mounted files and the environment, read one way: stripped of surrounding whitespace (a Secret
written with `echo` ends in a newline, which once became six retries of an unusable header, and an exception
text that carried the Slack token). Never logged. Used by the Git hosts, the ArgoCD API, Slack and the
redactor's list of what to hide.
"""

from __future__ import annotations

import os
from pathlib import Path

from cutover.errors import InvalidInput

__all__ = ["from_env", "from_file"]


def from_file(path: str | None, *, field: str, cause: str, hint: str) -> str | None:
    """The secret in `path` (None without a path); a path that cannot be read is `cause`, exit 2."""
    if not path:
        return None
    try:
        return Path(path).read_text(encoding="utf-8").strip() or None
    except (OSError, UnicodeDecodeError) as exc:
        why = exc.strerror if isinstance(exc, OSError) else "not UTF-8 text"
        raise InvalidInput(f"{field} {path}: cannot read: {why}", cause=cause, hint=hint) from exc


def from_env(name: str) -> str | None:
    return (os.environ.get(name) or "").strip() or None
