"""One field of one document set, replaced or removed in a YAML file from Git, and guarded: the field that frees a
backend's workload (docs/capacity.md) and puts it back. Pure functions, no I/O.

The selector edit (`yaml_edit`) rewrites a mapping of labels; freeing writes a scalar instead: a Deployment's or
StatefulSet's `spec.replicas`, the `count` of a kustomization's `replicas:` entry, a Helm values key, a KServe
InferenceService's `serving.kserve.io/stop` annotation. As there, the text is edited line by line with ruamel.yaml
only telling where things stand: a value is replaced in place (quoting and inline comment kept), a missing key is
added on a line of its own at its mapping's indentation (with the mappings on the way to it, such as
`annotations:`), and restoring removes exactly what freeing added. `guard` then proves the edit: every document equal
before and after except at that field, and no line changed but the field's own.
"""

from __future__ import annotations

import dataclasses
import difflib
from collections.abc import Mapping, Sequence
from typing import Any

from ruamel.yaml.comments import CommentedMap, CommentedSeq

from cutover.errors import InvalidInput
from cutover.plan import GitDocument
from cutover.sources.yaml_edit import (
    GuardFailed,
    _aliased,
    _load_all,
    _matching,
    _target,
    _value_span,
    parsed_pair,
    render_scalar,
    unified_diff,
    values_file,
)


@dataclasses.dataclass(frozen=True)
class Item:
    """A list element chosen by one of its keys: `replicas[name=llm-reasoning]` in a kustomization."""

    key: str
    value: str


Step = str | Item


@dataclasses.dataclass(frozen=True)
class FieldRef:
    """Where the field lives: a document of the file (`GitDocument("", "")`: its only one) and the path in it."""

    document: GitDocument
    path: tuple[Step, ...]
    namespace: str | None = None  # the only namespace the document may name (a workload: its Service's)
    values: bool = False  # a Helm values file's key: the file must be one, never an object (docs/security.md)

    def __str__(self) -> str:
        words: list[str] = []
        for step in self.path:
            if isinstance(step, str) and not ("." in step or "/" in step):
                words.append(step)
                continue
            if not words:
                words.append("")
            words[-1] += f"[{step.key}={step.value}]" if isinstance(step, Item) else f"[{step}]"
        return ".".join(words)


Value = str | int | None  # None: the field absent; an int is written as a number, a str as a string


@dataclasses.dataclass(frozen=True)
class FieldEdit:
    before: str
    after: str
    field: FieldRef
    old: str | None  # what the file held (None: absent)
    new: Value
    created: int = 0  # mappings on the way to the field that the edit added (restoring removes them again)

    @property
    def changed(self) -> bool:
        return self.before != self.after

    def diff(self, path: str) -> str:
        return unified_diff(self.before, self.after, path)


def read_field(text: str, field: FieldRef, *, source: str = "file") -> str | None:
    """The scalar the field holds, as a string; None where it (or a mapping on the way) is absent."""
    parent, missing = _walk(_document(text, field, source), field, source)
    if missing:
        return None
    return _scalar(parent.get(field.path[-1]), field, source)


def set_field(text: str, field: FieldRef, value: Value, *, source: str = "file", drop: int = 0) -> FieldEdit:
    """`value` written at the field (None: the field removed, and with it the `drop` mappings on the way to it that
    become empty: what an earlier `set_field` created). Every other byte of the file stays; guarded."""
    doc = _document(text, field, source)
    _in_namespace(doc, field, source)
    parent, missing = _walk(doc, field, source)
    old = None if missing else _scalar(parent.get(field.path[-1]), field, source)
    if (None if value is None else str(value)) == old:
        return FieldEdit(text, text, field, old, value)
    lines = text.splitlines(keepends=True)
    ending = "\r\n" if lines and lines[0].endswith("\r\n") else "\n"
    created = 0
    if value is None:
        _remove(lines, doc, field, drop=drop, source=source)
    elif old is not None:
        _replace(lines, parent, field, value, source=source)
    else:
        created = len(missing)
        _insert(lines, parent, [*missing, str(field.path[-1])], value, ending=ending, field=field, source=source)
    edit = FieldEdit(text, "".join(lines), field, old, value, created)
    guard(edit, drop=drop if value is None else 0)
    return edit


# --- finding the field -------------------------------------------------------------------------------------------


def _document(text: str, field: FieldRef, source: str) -> Any:
    docs = _load_all(text, source=source, typ="rt")
    where = _matching(docs, field.document, source)
    if _aliased(docs[where[0]]):
        raise InvalidInput(f"{source}: document {where[0] + 1} uses YAML anchors or aliases", cause="selector_alias",
                           hint="write the document out in full: an anchor or alias cannot be edited safely")
    if field.values:
        values_file(docs[where[0]], source)
    return _target(docs, where)


def _in_namespace(doc: Any, field: FieldRef, source: str) -> None:
    """A workload's document names no namespace but its Service's (`metadata.namespace`; a kustomization's
    `namespace:`, which sets its objects'): a handoff frees its own engines, never another team's of the same
    name."""
    if field.namespace is None or not isinstance(doc, Mapping):
        return
    metadata = doc.get("metadata")
    named = metadata.get("namespace") if isinstance(metadata, Mapping) else None
    named = named if named is not None else doc.get("namespace") if "resources" in doc or "replicas" in doc else None
    if named is not None and str(named) != field.namespace:
        raise InvalidInput(f"{source}: {field} is in namespace {named}, not the Service's ({field.namespace})",
                           cause="workload_elsewhere", hint="a handoff frees only the engines beside its Service: "
                           "name the workload in the Service's namespace in backends.<name>.workload")


def _walk(doc: Any, field: FieldRef, source: str) -> tuple[CommentedMap, list[str]]:
    """The deepest mapping on the way to the field, and the keys still missing below it (none: it is the field's
    parent)."""
    node = doc
    for depth, step in enumerate(field.path[:-1]):
        child = _child(node, step, field, source)
        if child is None:
            missing = list(field.path[depth:-1])
            if any(isinstance(step, Item) for step in missing):
                raise InvalidInput(f"{source}: {field}: no list entry {_named(missing)} to write into",
                                   cause="selector_path_missing", hint="add the entry to the file first")
            return node, [str(step) for step in missing]
        node = child
    if not isinstance(node, CommentedMap):
        raise InvalidInput(f"{source}: {field}: its parent is not a mapping", cause="selector_path_missing",
                           hint="check backends.<name>.workload in the plan")
    return node, []


def _child(node: Any, step: Step, field: FieldRef, source: str) -> Any:
    if isinstance(step, Item):
        found = [entry for entry in node if isinstance(entry, Mapping) and str(entry.get(step.key)) == step.value] \
            if isinstance(node, CommentedSeq) else []
        if len(found) > 1:
            raise InvalidInput(f"{source}: {field}: {len(found)} entries with {step.key}: {step.value}",
                               cause="document_ambiguous", hint="keep one such entry in the file")
        return found[0] if found else None
    if not isinstance(node, CommentedMap):
        raise InvalidInput(f"{source}: {field}: {step} is below something that is not a mapping",
                           cause="selector_path_missing", hint="check backends.<name>.workload in the plan")
    return node.get(step)


def _named(steps: Sequence[Step]) -> str:
    return ", ".join(f"{step.key}={step.value}" for step in steps if isinstance(step, Item))


def _scalar(value: Any, field: FieldRef, source: str) -> str | None:
    if value is None:
        return None
    if isinstance(value, Mapping | list):
        found = "a mapping" if isinstance(value, Mapping) else "a list"
        raise InvalidInput(f"{source}: {field}: expected a scalar, found {found}", cause="selector_not_mapping",
                           hint="check backends.<name>.workload in the plan")
    return str(value).lower() if isinstance(value, bool) else str(value)


# --- changing the text -------------------------------------------------------------------------------------------


def _written(value: str | int) -> str:
    return str(value) if isinstance(value, int) else render_scalar(value)


def _one_line(lines: list[str], mapping: CommentedMap, key: str, field: FieldRef, source: str) -> tuple[int, int]:
    number, column = mapping.lc.value(key)
    if number != mapping.lc.key(key)[0] or lines[number][column:].lstrip().startswith(("&", "*", "|", ">")):
        raise InvalidInput(f"{source}: line {number + 1}: {field} is not a one-line `key: value`",
                           cause="selector_alias", hint="write the value on the key's line, without anchors")
    return number, column


def _replace(lines: list[str], parent: CommentedMap, field: FieldRef, value: str | int, *, source: str) -> None:
    key = str(field.path[-1])
    number, column = _one_line(lines, parent, key, field, source)
    start, end, quote = _value_span(lines[number], column)
    written = f"{quote}{value}{quote}" if quote and isinstance(value, str) else _written(value)
    lines[number] = lines[number][:start] + written + lines[number][end:]


def _insert(lines: list[str], parent: CommentedMap, keys: list[str], value: str | int, *, ending: str,
            field: FieldRef, source: str) -> None:
    """The keys as nested block mappings ending in `value`, as the first entries of `parent` (a block mapping that
    holds something: where a new line goes is read from its first key)."""
    if not parent or parent.fa.flow_style():
        raise InvalidInput(f"{source}: {field}: the mapping to add it to is empty or written inline",
                           cause="selector_not_mapping", hint="write that mapping in block style with one entry")
    number, column = parent.lc.key(next(iter(parent)))
    if lines[number][:column].strip():  # `- name: x` or `{a: 1}`: a key that does not begin its line
        raise InvalidInput(f"{source}: line {number + 1}: {field}: cannot add a line beside {lines[number].strip()!r}",
                           cause="selector_not_mapping", hint="write the mapping's first key on a line of its own")
    added = [f"{' ' * (column + 2 * depth)}{render_scalar(key)}:{ending}" for depth, key in enumerate(keys[:-1])]
    added.append(f"{' ' * (column + 2 * (len(keys) - 1))}{render_scalar(keys[-1])}: {_written(value)}{ending}")
    lines[number:number] = added


def _remove(lines: list[str], doc: Any, field: FieldRef, *, drop: int, source: str) -> None:
    """The field's line, and each of the `drop` mappings above it that it leaves empty."""
    chain = [doc]
    for step in field.path[:-1]:
        chain.append(_child(chain[-1], step, field, source))
    number, _ = _one_line(lines, chain[-1], str(field.path[-1]), field, source)
    gone = [number]
    for depth in range(1, drop + 1):
        mapping, key = chain[-depth - 1], field.path[-depth - 1]
        if len(chain[-depth]) != 1 or isinstance(key, Item):
            break
        gone.append(mapping.lc.key(key)[0])
    for line in sorted(gone, reverse=True):
        del lines[line]


# --- the guard ---------------------------------------------------------------------------------------------------


def guard(edit: FieldEdit, *, drop: int = 0) -> None:
    """Refuse an edit that changes anything but the field (and the mappings it adds or removes on the way)."""
    before, after = parsed_pair(edit.before, edit.after)
    where = _matching(before, edit.field.document, "before the edit")
    expected = list(before)
    _apply(_target(expected, where), edit.field.path, edit.new, drop=drop)
    if expected != after:
        raise GuardFailed(f"the edit changed more than {edit.field}")
    allowed = 1 + max(edit.created, drop)
    changed = sum(max(a1 - a0, b1 - b0) for tag, a0, a1, b0, b1 in difflib.SequenceMatcher(
        a=edit.before.splitlines(), b=edit.after.splitlines(), autojunk=False).get_opcodes() if tag != "equal")
    if changed > allowed:
        raise GuardFailed(f"the edit changed {changed} lines for {edit.field}, at most {allowed} expected")


def _apply(doc: Any, path: tuple[Step, ...], value: Value, *, drop: int) -> None:
    """The edit as it should read, made on the parsed document (the guard's expectation)."""
    chain: list[Any] = [doc]
    for step in path[:-1]:
        node = chain[-1]
        if isinstance(step, Item):
            chain.append(next(entry for entry in node if str(entry.get(step.key)) == step.value))
        else:
            if value is not None and step not in node:
                node[step] = {}
            chain.append(node[step])
    last = path[-1]
    assert isinstance(last, str)
    if value is not None:
        chain[-1][last] = value
        return
    del chain[-1][last]
    for depth in range(1, drop + 1):
        key = path[-depth - 1]
        if chain[-depth] or isinstance(key, Item):
            break
        del chain[-depth - 1][key]
