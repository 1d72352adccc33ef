"""How deep a YAML text can nest, bounded before any parser sees it.

libyaml's composer (ruamel.yaml's C loader) recurses on the C stack: a document some 50,000 levels deep ends the
process with a segmentation fault, no exception and no message; the pure-Python loader raises RecursionError
instead. Both files cutover parses come from outside (the plan from a ConfigMap, the Service file from Git), so
both are measured first with `depth_bound` and refused above `MAX_DEPTH`."""

from __future__ import annotations

MAX_DEPTH = 200  # nesting levels: a Service or a plan is under 10; the C loader survives 20,000 here
_COMPACT = ("- ", "? ")  # block indicators that open a level without a new line: `- - - - x`


def depth_bound(text: str) -> int:
    """An upper bound of the nesting in `text`: the deepest flow nesting (`[[[[`, `{{{{`) plus, on the line
    where it is largest, indentation plus compact block indicators. Counted on characters in one pass, so a
    hostile file costs what its size costs. Quoted scalars are not told apart: a bound may be high, never low."""
    flow = deepest_flow = deepest_line = 0
    for line in text.splitlines():
        stripped = line.lstrip(" ")
        block = len(line) - len(stripped) + sum(stripped.count(mark) for mark in _COMPACT)
        deepest_line = max(deepest_line, block)
        for char in stripped:
            if char in "[{":
                flow += 1
                deepest_flow = max(deepest_flow, flow)
            elif char in "]}":
                flow = max(0, flow - 1)
    return deepest_flow + deepest_line
