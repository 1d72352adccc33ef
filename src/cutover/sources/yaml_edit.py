"""The selector edit in a YAML file from Git, and the guard that must pass before any commit.

The edit is made on the text, line by line, with ruamel.yaml (round-trip mode) only telling where each
selector entry stands: a label that stays keeps its line byte for byte (inline comment included), a
changed value is replaced in place, a dropped label loses its line and a new one is added after the
last entry at the same indentation. So the comment header, quoting, key order, document separators,
the final newline and CRLF line ends all survive, and a reviewer sees only the labels that change. A
flow-style selector (a JSON manifest's, over one line or several) is rewritten in its own layout, quoted as
JSON where the file is JSON. The Service may be a document of its own or an item of a `kind: List`.

`guard()` then proves it: both texts parse, every document is equal except at the selector path,
which holds the new selector, and every changed line lies inside the selector block. Pure functions,
no I/O; called by the Git providers before a write and by `cutover diff`.
"""

from __future__ import annotations

import dataclasses
import difflib
import io
import json
import re
from collections.abc import Mapping
from typing import Any

from ruamel.yaml import YAML
from ruamel.yaml.comments import CommentedMap
from ruamel.yaml.error import YAMLError

from cutover.errors import CutoverError, InvalidInput
from cutover.plan import GitDocument, label_problem
from cutover.plan.yamlbounds import MAX_DEPTH, depth_bound

# Words YAML 1.1 (which Kubernetes tooling still speaks) or 1.2 reads as something other than a string.
_NOT_A_STRING = re.compile(
    r"^(?:y|Y|yes|Yes|YES|n|N|no|No|NO|true|True|TRUE|false|False|FALSE|on|On|ON|off|Off|OFF"
    r"|~|null|Null|NULL"
    r"|[-+]?(?:\d[\d_]*)?\.?\d[\d_]*(?:[eE][-+]?\d+)?"  # ints and floats, 1_000, .5, 1e3
    r"|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN)"
    r"|0[xX][0-9a-fA-F_]+|0o?[0-7_]+|0b[01_]+"
    r"|\d{4}-\d\d?-\d\d?)$"  # dates
)
_PLAIN_SAFE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_./-]*$")


class GuardFailed(CutoverError):
    """The edit would change more than the selector: a bug, and nothing is committed."""

    default_cause = "diff_guard"


@dataclasses.dataclass(frozen=True)
class SelectorEdit:
    before: str
    after: str
    old: Mapping[str, str]
    new: Mapping[str, str]
    block: tuple[int, int] | None = None  # first and last line (0-based) of the selector block in `before`

    @property
    def changed(self) -> bool:
        return self.before != self.after

    def diff(self, path: str) -> str:
        return unified_diff(self.before, self.after, path)


def unified_diff(before: str, after: str, path: str) -> str:
    """A unified diff that `git apply` and `patch` take: CRLF kept, a last line without a newline marked."""
    lines = difflib.unified_diff(before.splitlines(keepends=True), after.splitlines(keepends=True),
                                 fromfile=f"a/{path}", tofile=f"b/{path}")
    return "".join(line if line.endswith("\n") else f"{line}\n\\ No newline at end of file\n" for line in lines)


@dataclasses.dataclass(frozen=True)
class _Located:
    """Where the selector mapping stands in the text (0-based lines)."""

    mapping: CommentedMap
    key_line: int  # the line of `selector:`
    flow: bool
    indent: int  # column of the entries (block style, and a flow mapping over several lines)
    entries: dict[str, tuple[int, int]]  # label key -> (line, column of its value)
    end_line: int  # the selector's last line: its last entry, or a flow mapping's closing brace
    json: bool  # the file is JSON: keys and values are written double-quoted
    value_at: tuple[int, int]  # line and column where the mapping starts (a flow mapping's `{`)


def read_selector(text: str, *, document: GitDocument, selector_path: str, source: str = "file") -> dict[str, str]:
    """The selector mapping as the file holds it now."""
    located = _locate(text, document=document, selector_path=selector_path, source=source)
    return {str(key): str(value) for key, value in located.mapping.items()}


def edit_selector(text: str, *, document: GitDocument, selector_path: str, selector: Mapping[str, str],
                  source: str = "file") -> SelectorEdit:
    """Replace the selector of the named document; every byte outside the selector block stays."""
    for key, value in selector.items():
        problem = label_problem(key, value)
        if problem:
            raise InvalidInput(f"selector: {problem}", cause="invalid_label", hint="fix the label in the plan")
    located = _locate(text, document=document, selector_path=selector_path, source=source)
    old = {str(key): str(value) for key, value in located.mapping.items()}
    if old == dict(selector):
        return SelectorEdit(text, text, old, dict(selector))
    lines = text.splitlines(keepends=True)
    ending = "\r\n" if lines and lines[0].endswith("\r\n") else "\n"
    if located.flow:
        _rewrite_flow(lines, located, selector, ending)
    else:
        _rewrite_block(lines, located, old, selector, ending)
    after = "".join(lines)
    edit = SelectorEdit(text, after, old, dict(selector), block=_block(located))
    guard(edit, document=document, selector_path=selector_path)
    return edit


MAX_FILE = 1 << 20  # bytes: a Service file is a few KiB; a bigger one is not what the plan names


def _load_all(text: str, *, source: str, typ: str) -> list[Any]:
    if len(text.encode("utf-8", errors="replace")) > MAX_FILE:
        raise InvalidInput(f"{source}: {len(text.encode('utf-8', errors='replace'))} bytes: larger than the "
                           f"{MAX_FILE >> 20} MiB a Service file may be", cause="invalid_file",
                           hint="point git.path at the file that holds the Service")
    if depth_bound(text) > MAX_DEPTH:  # before libyaml can overflow the C stack
        raise InvalidInput(f"{source}: nested deeper than {MAX_DEPTH} levels", cause="invalid_file",
                           hint="point git.path at the file that holds the Service")
    for number, line in enumerate(text.splitlines(), start=1):
        if line[: len(line) - len(line.lstrip())].count("\t"):
            raise InvalidInput(f"{source}: line {number}: a tab in the indentation (YAML allows spaces only)",
                               cause="invalid_file", hint="indent with spaces")
    try:
        return list(YAML(typ=typ).load_all(io.StringIO(text)))  # the C parser where ruamel.yaml.clib is there
    except RecursionError as exc:
        raise InvalidInput(f"{source}: nested too deeply to read", cause="invalid_file",
                           hint="point git.path at the file that holds the Service") from exc
    except YAMLError as exc:
        words = " ".join(str(exc).split())[:300]
        kind = "a duplicate key" if "duplicate key" in words else "not valid YAML"
        raise InvalidInput(f"{source}: {kind}: {words}", cause="invalid_file", hint="fix the file in Git") from exc


def _aliased(node: Any, seen: set[int] | None = None) -> bool:
    """Whether a round-trip document holds an anchor or an alias anywhere: an aliased node is one object met
    twice (a billion-laughs file expands exponentially the moment it is compared), an anchor says so itself."""
    seen = set() if seen is None else seen
    anchor = getattr(node, "anchor", None)
    if anchor is not None and getattr(anchor, "value", None):
        return True
    if not isinstance(node, Mapping | list):
        return False
    if id(node) in seen:
        return True
    seen.add(id(node))
    children = list(node.keys()) + list(node.values()) if isinstance(node, Mapping) else node
    return any(_aliased(child, seen) for child in children)


def _matching(docs: list[Any], document: GitDocument, source: str) -> tuple[int, int | None]:
    """The document holding the named object: (index, None), or (index of a `kind: List`, index of its item).
    A document without kind and name (`GitDocument("", "")`, a Helm values file) means the file's only one."""
    if not document.kind and not document.name:
        if len([doc for doc in docs if doc is not None]) != 1:
            raise InvalidInput(f"{source}: expected one YAML document (a values file), found {len(docs)}",
                               cause="document_ambiguous", hint="keep the values in a file of their own")
        return next(index for index, doc in enumerate(docs) if doc is not None), None

    def named(node: Any) -> bool:
        return isinstance(node, Mapping) and node.get("kind") == document.kind and \
            isinstance(node.get("metadata"), Mapping) and node["metadata"].get("name") == document.name

    found: list[tuple[int, int | None]] = []
    for index, doc in enumerate(docs):
        if named(doc):
            found.append((index, None))
        elif isinstance(doc, Mapping) and doc.get("kind") == "List" and isinstance(doc.get("items"), list):
            found += [(index, item) for item, node in enumerate(doc["items"]) if named(node)]
    if not found:
        raise InvalidInput(f"{source}: no document with kind {document.kind} and metadata.name {document.name}",
                           cause="document_not_found", hint="check git.path and git.document in the plan")
    if len(found) > 1:
        places = ", ".join(str(i + 1) if item is None else f"{i + 1} (item {item + 1})" for i, item in found)
        raise InvalidInput(f"{source}: {len(found)} documents match kind {document.kind} and metadata.name "
                           f"{document.name} (documents {places})", cause="document_ambiguous",
                           hint="keep one such document in the file")
    return found[0]


def values_file(doc: Any, source: str) -> None:
    """A values key is edited only in a values file: a Kubernetes object (another team's Namespace, a Secret) read as
    one would let a plan rewrite any of its fields through `selectorPath` or `valuesKey` (docs/security.md)."""
    # both keys: a chart's values may hold a `kind` of their own (Deployment or DaemonSet), never both
    if isinstance(doc, Mapping) and "kind" in doc and "apiVersion" in doc:
        raise InvalidInput(f"{source}: expected a Helm values file, found a Kubernetes object (it has apiVersion "
                           "and kind)", cause="not_values_file",
                           hint="point git.path (or the workload's path) at the chart's values file; objects are "
                                "edited as git.source manifest")


def _target(docs: list[Any], where: tuple[int, int | None]) -> Any:
    doc = docs[where[0]]
    return doc if where[1] is None else doc["items"][where[1]]


def holds_values(text: str, *, source: str = "file") -> bool:
    """One YAML mapping without a `kind`: a Helm values file, which `cutover diff` without a plan addresses by
    `--selector-path` alone."""
    docs = [doc for doc in _load_all(text, source=source, typ="safe") if doc is not None]
    return len(docs) == 1 and isinstance(docs[0], Mapping) and "kind" not in docs[0]


def documents(text: str, *, source: str = "file") -> list[dict[str, Any]]:
    """The objects a file holds, documents and List items: what ArgoCD applies from a plain manifest."""
    found = []
    for doc in _load_all(text, source=source, typ="safe"):
        nodes = doc["items"] if isinstance(doc, Mapping) and doc.get("kind") == "List" and \
            isinstance(doc.get("items"), list) else [doc]
        found += [dict(node) for node in nodes if isinstance(node, Mapping)]
    return found


def services(text: str, *, source: str = "file") -> list[str]:
    """The names of the Services a file holds (documents and List items): how `cutover diff` without a plan finds
    the file's only Service."""
    names = []
    for doc in _load_all(text, source=source, typ="safe"):
        nodes = doc["items"] if isinstance(doc, Mapping) and doc.get("kind") == "List" and \
            isinstance(doc.get("items"), list) else [doc]
        names += [str(node["metadata"]["name"]) for node in nodes if isinstance(node, Mapping) and
                  node.get("kind") == "Service" and isinstance(node.get("metadata"), Mapping) and
                  node["metadata"].get("name")]
    return names


def _walk(doc: Any, selector_path: str, source: str) -> tuple[Any, str]:
    *parents, last = selector_path.split(".")
    node = doc
    for depth, part in enumerate(parents):
        if not isinstance(node, Mapping) or part not in node:
            where = ".".join(parents[: depth + 1])
            raise InvalidInput(f"{source}: {where}: missing on the way to {selector_path}",
                               cause="selector_path_missing", hint="check git.selectorPath in the plan")
        node = node[part]
    if not isinstance(node, Mapping) or last not in node:
        raise InvalidInput(f"{source}: {selector_path}: missing", cause="selector_path_missing",
                           hint="check git.selectorPath in the plan")
    return node, last


def _locate(text: str, *, document: GitDocument, selector_path: str, source: str) -> _Located:
    docs = _load_all(text, source=source, typ="rt")
    where = _matching(docs, document, source)
    if _aliased(docs[where[0]]):
        raise InvalidInput(f"{source}: document {where[0] + 1} uses YAML anchors or aliases", cause="selector_alias",
                           hint="write the document out in full: an anchor or alias in the edited document cannot "
                                "be edited and guarded safely")
    parent, key = _walk(_target(docs, where), selector_path, source)
    mapping = parent[key]
    if not isinstance(mapping, CommentedMap):
        raise InvalidInput(f"{source}: {selector_path}: expected a mapping of labels, found {type(mapping).__name__}",
                           cause="selector_not_mapping", hint="point git.selectorPath at the selector mapping")
    lines = text.splitlines()
    key_line, _ = parent.lc.key(key)
    value_line, value_col = parent.lc.value(key)
    entries: dict[str, tuple[int, int]] = {}
    for label in mapping:
        line, column = mapping.lc.value(label)
        value = mapping[label]
        if not isinstance(value, str) or isinstance(label, CommentedMap):
            raise InvalidInput(f"{source}: line {line + 1}: label {label!r} has a value that is not a string",
                               cause="selector_not_mapping", hint="quote label values in the file")
        if line != mapping.lc.key(label)[0] or lines[line][column:].lstrip().startswith(("&", "*", "|", ">")):
            raise InvalidInput(f"{source}: line {line + 1}: label {label!r} is not a one-line `key: value`",
                               cause="selector_alias", hint="write each label on one line")
        entries[str(label)] = (line, column)
    flow = bool(mapping.fa.flow_style())
    indent = mapping.lc.key(next(iter(mapping)))[1] if mapping else 0
    last = max([line for line, _ in entries.values()] + [key_line])
    json_file = text.lstrip().startswith(("{", "["))
    located = _Located(mapping, key_line, flow, indent, entries, last, json_file, (value_line, value_col))
    return dataclasses.replace(located, end_line=_flow_span(lines, located)[2]) if flow else located


def render_scalar(value: str) -> str:
    """A label value as YAML that every reader takes for this string (label values hold no quotes)."""
    if _PLAIN_SAFE.match(value) and not _NOT_A_STRING.match(value):
        return value
    return f'"{value}"'


def _value_span(line: str, column: int) -> tuple[int, int, str]:
    """Start, end and quote character of the scalar that starts at `column`."""
    first = line[column] if column < len(line) else ""
    if first in "'\"":
        end = line.index(first, column + 1) + 1
        return column, end, first
    rest = line[column:].rstrip("\r\n")
    comment = re.search(r"\s#", rest)
    token = rest[: comment.start()] if comment else rest
    return column, column + len(token.rstrip()), ""


def _rewrite_block(lines: list[str], located: _Located, old: Mapping[str, str], new: Mapping[str, str],
                   ending: str) -> None:
    dropped: list[int] = []
    for label, (number, column) in located.entries.items():
        if label not in new:
            dropped.append(number)
        elif new[label] != old[label]:
            start, end, quote = _value_span(lines[number], column)
            value = f"{quote}{new[label]}{quote}" if quote else render_scalar(new[label])  # keep the file's quoting
            lines[number] = lines[number][:start] + value + lines[number][end:]
    last = max(number for number, _ in located.entries.values()) if located.entries else located.key_line
    added = [f"{' ' * located.indent}{render_scalar(label)}: {render_scalar(value)}{ending}"
             for label, value in new.items() if label not in old]
    if not lines[last].endswith(("\n", "\r\n")):
        lines[last] += ending  # the selector was the file's last line, without a final newline
        if added:
            added[-1] = added[-1].rstrip("\r\n")
    lines[last + 1:last + 1] = added
    for number in sorted(dropped, reverse=True):
        del lines[number]


def _flow_span(lines: list[str], located: _Located) -> tuple[int, int, int, int]:
    """Where a flow mapping stands: (line, column) of its `{` and of its matching `}`; strings are skipped."""
    number, column = located.value_at
    start = lines[number].index("{", column)
    depth, quote, escaped = 0, "", False
    for line_number in range(number, len(lines)):
        line = lines[line_number]
        for column in range(start if line_number == number else 0, len(line)):
            char = line[column]
            if quote:  # inside a string: only its end matters (a backslash escapes in double quotes)
                if escaped:
                    escaped = False
                elif char == "\\" and quote == '"':
                    escaped = True
                elif char == quote:
                    quote = ""
                continue
            if char in "\"'":
                quote = char
            depth += {"{": 1, "}": -1}.get(char, 0)
            if depth == 0:
                return number, start, line_number, column
    raise InvalidInput(f"line {number + 1}: a flow-style selector without its closing brace",
                       cause="selector_not_mapping", hint="fix the file's braces")


def _entry(located: _Located, key: str, value: str) -> str:
    if located.json:
        return f"{json.dumps(key)}: {json.dumps(value)}"
    return f"{render_scalar(key)}: {render_scalar(value)}"


def _rewrite_flow(lines: list[str], located: _Located, new: Mapping[str, str], ending: str) -> None:
    first, start, last, end = _flow_span(lines, located)
    entries = [_entry(located, key, value) for key, value in new.items()]
    if first == last:  # one line: it stays one line
        line = lines[first]
        lines[first] = line[:start] + "{" + ", ".join(entries) + "}" + line[end + 1:]
        return
    indent = " " * located.indent  # one entry a line, where the first one stood; the closing line as it was
    body = [f"{indent}{entry}{',' if index < len(entries) - 1 else ''}{ending}" for index, entry in enumerate(entries)]
    lines[first:last + 1] = [lines[first][:start] + "{" + ending, *body, lines[last]]


def parsed_pair(before_text: str, after_text: str) -> tuple[list[Any], list[Any]]:
    """Both sides of an edit as documents, for a guard: the edited side must parse and hold as many documents."""
    before = _load_all(before_text, source="before the edit", typ="safe")
    try:
        after = _load_all(after_text, source="after the edit", typ="safe")
    except InvalidInput as exc:
        raise GuardFailed(f"the edited file does not parse: {exc.message}") from exc
    if len(before) != len(after):
        raise GuardFailed("the edit changed the number of documents")
    return before, after


def guard(edit: SelectorEdit, *, document: GitDocument, selector_path: str) -> None:
    """Refuse any edit that changes more than the selector mapping of the named document."""
    before, after = parsed_pair(edit.before, edit.after)
    target = _matching(before, document, "before the edit")
    for index, (old_doc, new_doc) in enumerate(zip(before, after, strict=True)):
        if index != target[0]:  # unchanged lines prove these (below); aliases there are never compared expanded
            if not _aliased(old_doc) and old_doc != new_doc:
                raise GuardFailed(f"the edit changed document {index + 1}, which is not the target")
            continue
        parent, key = _walk(_target(after, target), selector_path, "after the edit")
        if dict(parent[key]) != dict(edit.new):
            raise GuardFailed(f"after the edit {selector_path} is {dict(parent[key])}, not {dict(edit.new)}")
        parent[key] = dict(edit.old)
        if old_doc != new_doc:
            raise GuardFailed("the edit changed the target document outside the selector")
    _only_selector_lines_changed(edit, document=document, selector_path=selector_path)


def _block(located: _Located) -> tuple[int, int]:
    return located.key_line, located.end_line


def _only_selector_lines_changed(edit: SelectorEdit, *, document: GitDocument, selector_path: str) -> None:
    first, last = edit.block or _block(_locate(edit.before, document=document, selector_path=selector_path,
                                               source="before the edit"))
    grown = len(edit.after.splitlines()) - len(edit.before.splitlines())
    old_lines, new_lines = edit.before.splitlines(keepends=True), edit.after.splitlines(keepends=True)
    for tag, a0, a1, b0, b1 in difflib.SequenceMatcher(a=old_lines, b=new_lines, autojunk=False).get_opcodes():
        if tag == "equal":
            continue
        inside_old = a0 >= first and a1 <= last + 1
        inside_new = b0 >= first and b1 <= last + 1 + max(grown, 0)
        if not (inside_old and inside_new):
            raise GuardFailed(f"the edit changed lines {a0 + 1}-{a1} outside the selector block "
                              f"(lines {first + 1}-{last + 1})")


# --- one scalar at a dotted path (a Helm values key such as `engine: vllm`) ----------------------------------


def read_value(text: str, *, value_path: str, source: str = "file") -> Any:
    """What the file's only document holds at `value_path`: a mapping (as a dict) or a scalar (as a string)."""
    docs = _load_all(text, source=source, typ="rt")
    values = _target(docs, _matching(docs, GitDocument("", ""), source))
    values_file(values, source)
    parent, key = _walk(values, value_path, source)
    value = parent[key]
    if isinstance(value, Mapping):
        return {str(k): str(v) for k, v in value.items()}
    if isinstance(value, list) or value is None:
        raise InvalidInput(f"{source}: {value_path}: expected a mapping of labels or a scalar, found "
                           f"{'a list' if value is not None else 'nothing'}", cause="selector_not_mapping",
                           hint="point git.selectorPath at the selector mapping or at the key the chart reads")
    return str(value)


def edit_value(text: str, *, value_path: str, value: str, source: str = "file") -> SelectorEdit:
    """The scalar at `value_path` replaced in place (its quoting and inline comment kept); guarded: every other
    byte of the file unchanged, and the documents equal except at that key."""
    docs = _load_all(text, source=source, typ="rt")
    values = _target(docs, _matching(docs, GitDocument("", ""), source))
    values_file(values, source)
    parent, key = _walk(values, value_path, source)
    old = parent[key]
    if isinstance(old, Mapping | list) or old is None:
        raise InvalidInput(f"{source}: {value_path}: expected a scalar to write {value!r} into, found "
                           f"{type(old).__name__ if old is not None else 'nothing'}", cause="selector_not_mapping",
                           hint="point git.selectorPath at the key the chart reads")
    if str(old) == value:
        return SelectorEdit(text, text, {value_path: str(old)}, {value_path: value})
    lines = text.splitlines(keepends=True)
    number, column = parent.lc.value(key)
    if lines[number][column:].lstrip().startswith(("&", "*", "|", ">")):
        raise InvalidInput(f"{source}: line {number + 1}: {value_path} is not a one-line scalar",
                           cause="selector_alias", hint="write the value on one line, without anchors")
    start, end, quote = _value_span(lines[number], column)
    # a number or a boolean stays one (a chart may compare it as such); a string stays a string
    written = f"{quote}{value}{quote}" if quote else value if not isinstance(old, str) else render_scalar(value)
    lines[number] = lines[number][:start] + written + lines[number][end:]
    edit = SelectorEdit(text, "".join(lines), {value_path: str(old)}, {value_path: value}, block=(number, number))
    before, after = _load_all(edit.before, source="before the edit", typ="safe"), _load_all(
        edit.after, source="after the edit", typ="safe")
    where = _matching(after, GitDocument("", ""), "after the edit")
    changed_parent, changed_key = _walk(_target(after, where), value_path, "after the edit")
    if str(changed_parent[changed_key]) != value:
        raise GuardFailed(f"after the edit {value_path} is {changed_parent[changed_key]!r}, not {value!r}")
    kept_parent, kept_key = _walk(_target(before, where), value_path, "before the edit")
    changed_parent[changed_key] = kept_parent[kept_key]
    if before != after:
        raise GuardFailed(f"the edit changed the values file beyond {value_path}")
    return edit
