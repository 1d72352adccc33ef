"""One node of the plan file while it is read: it knows its path, so every error names the field, what was
expected and what was found (never a credential in a URL)."""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from typing import Any
from urllib.parse import urlsplit

from cutover.errors import InvalidInput
from cutover.plan.model import parse_duration

_CREDENTIALS = re.compile(r"^\s*[a-zA-Z][a-zA-Z0-9+.-]*://[^/\s@]+@")  # scheme://userinfo@host


class Field:
    """One node of the plan while it is being read; knows its path for error messages."""

    def __init__(self, source: str, path: str, value: Any) -> None:
        self.source, self.path, self.value = source, path, value

    def fail(self, expected: str) -> InvalidInput:
        where = self.path or "(top level)"
        return InvalidInput(
            f"{self.source}: {where}: expected {expected}, found {describe(self.value)}",
            cause="invalid_plan",
            hint=f"fix `{where}` in the plan; nothing was touched",
        )

    def child(self, key: str | int) -> Field:
        if isinstance(key, int):
            return Field(self.source, f"{self.path}[{key}]", self.value[key])
        value = self.value.get(key) if isinstance(self.value, Mapping) else None
        return Field(self.source, f"{self.path}.{key}" if self.path else key, value)

    def mapping(self, allowed: tuple[str, ...], *, required: tuple[str, ...] = ()) -> Field:
        if not isinstance(self.value, Mapping):
            raise self.fail("a mapping")
        for key in self.value:
            if key not in allowed:
                unknown = Field(self.source, f"{self.path}.{key}" if self.path else str(key), self.value[key])
                raise unknown.fail(f"no such key (known here: {', '.join(allowed)})")
        for key in required:
            if self.value.get(key) is None:
                raise self.child(key).fail("a value (this field is required)")
        return self

    def present(self, key: str) -> bool:
        return isinstance(self.value, Mapping) and self.value.get(key) is not None

    def string(self, *, default: str | None = None, choices: tuple[str, ...] = ()) -> str:
        if self.value is None and default is not None:
            return default
        if not isinstance(self.value, str) or not self.value.strip():
            raise self.fail("a non-empty string" + (f", one of {', '.join(choices)}" if choices else ""))
        if choices and self.value not in choices:
            raise self.fail(f"one of {', '.join(choices)}")
        return self.value

    def boolean(self, *, default: bool) -> bool:
        if self.value is None:
            return default
        if not isinstance(self.value, bool):
            raise self.fail("true or false")
        return self.value

    def integer(self, *, default: int | None = None, low: int = 0, high: int = 2**31) -> int:
        if self.value is None and default is not None:
            return default
        if isinstance(self.value, bool) or not isinstance(self.value, int) or not low <= self.value <= high:
            raise self.fail(f"an integer from {low} to {high}")
        return self.value

    def duration(self, *, default: float) -> float:
        if self.value is None:
            return default
        try:
            seconds = parse_duration(self.value)
        except ValueError:
            raise self.fail("a duration string like '90s', '30m', '1h', '1h30m' or '500ms'") from None
        if seconds <= 0:
            raise self.fail("a duration above zero")
        return seconds

    def items(self) -> Iterator[tuple[str, Field]]:
        for key in self.value:
            yield str(key), self.child(key)


def describe(value: Any) -> str:
    kinds = {bool: "a boolean", int: "an integer", float: "a number", str: "a string"}
    if value is None:
        return "nothing"
    if isinstance(value, Mapping):
        return "{} (an empty mapping)" if not value else f"a mapping with keys {', '.join(map(str, value))}"
    if isinstance(value, list):
        return "[] (an empty list)" if not value else f"a list of {len(value)}"
    if isinstance(value, str) and _CREDENTIALS.search(value):  # never echoed, not even cut short
        parts = urlsplit(value.strip())
        return f"'{parts.scheme}://{parts.hostname or '?'}/...' (a URL with credentials in it, not shown)"
    text = ("true" if value else "false") if isinstance(value, bool) else repr(value)
    text = text if len(text) <= 60 else text[:57] + "..."
    return f"{text} ({kinds.get(type(value), type(value).__name__)})"


def first_line(exc: Exception) -> str:
    """The parser's message in one line, without ruamel's pointer to its own docs (not the user's concern)."""
    text = " ".join(str(exc).split())
    return re.sub(r"\s*To suppress this check see: \S+", "", text)[:300]
