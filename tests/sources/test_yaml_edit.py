"""The comment-preserving selector edit and its guard, on the reference Service file and on generated
files with comments in random places."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cutover.errors import InvalidInput
from cutover.plan import GitDocument
from cutover.sources import yaml_edit

FIXTURE = (Path(__file__).parent.parent / "fixtures" / "reasoning-long-service.yaml").read_text()
SERVICE = GitDocument("Service", "reasoning-long-predictor")
CANDLE = {"app.kubernetes.io/name": "llm-reasoning-candle", "component": "predictor"}
VLLM = {"app.kubernetes.io/name": "llm-reasoning", "component": "predictor",
        "serving.kserve.io/inferenceservice": "reasoning"}


def edit(text: str, selector: dict[str, str], document: GitDocument = SERVICE,
         path: str = "spec.selector") -> yaml_edit.SelectorEdit:
    return yaml_edit.edit_selector(text, document=document, selector_path=path, selector=selector, source="svc.yaml")


def changed_lines(before: str, after: str) -> list[str]:
    return [line for line in edit_diff(before, after) if line[:1] in "+-" and line[:3] not in ("+++", "---")]


def edit_diff(before: str, after: str) -> list[str]:
    return yaml_edit.SelectorEdit(before, after, {}, {}).diff("f").splitlines()


def test_the_reference_file_changes_exactly_the_selector_lines() -> None:
    result = edit(FIXTURE, CANDLE)
    assert changed_lines(FIXTURE, result.after) == [
        "-    app.kubernetes.io/name: llm-reasoning             # the vLLM deployment",
        "+    app.kubernetes.io/name: llm-reasoning-candle             # the vLLM deployment",
        "-    serving.kserve.io/inferenceservice: reasoning     # KServe's own label on the vLLM pods",
    ]
    assert result.old == VLLM and result.new == CANDLE
    assert yaml_edit.read_selector(result.after, document=SERVICE, selector_path="spec.selector") == CANDLE
    before_lines, after_lines = FIXTURE.splitlines(), result.after.splitlines()
    assert before_lines[:30] == after_lines[:30]  # the whole comment header and everything above the selector
    assert before_lines[-9:] == after_lines[-9:]  # the ports block, to the last byte
    assert result.after.endswith("      protocol: TCP\n")


def test_a_changed_value_keeps_its_inline_comment_and_a_kept_label_its_line() -> None:
    result = edit(FIXTURE, CANDLE)
    lines = result.after.splitlines()
    selector = lines[lines.index("  selector:") + 1:][:2]
    assert selector == ["    app.kubernetes.io/name: llm-reasoning-candle             # the vLLM deployment",
                        "    component: predictor"]


def test_back_again_restores_the_original_bytes_except_for_the_dropped_comment() -> None:
    there = edit(FIXTURE, CANDLE).after
    back = edit(there, VLLM).after
    assert back.replace("    serving.kserve.io/inferenceservice: reasoning\n",
                        "    serving.kserve.io/inferenceservice: reasoning     # KServe's own label on the vLLM pods\n"
                        ) == FIXTURE


def test_nothing_to_change_is_no_change() -> None:
    result = edit(FIXTURE, VLLM)
    assert not result.changed and result.after == FIXTURE


MULTI = """# a file with three documents
---
apiVersion: v1
kind: Service
metadata:
  name: other
spec:
  selector:
    app: other
---
apiVersion: v1
kind: Service
metadata: {name: reasoning-long-predictor}
spec:
  selector: {app: a, tier: "1.0"}  # flow style
...
---
kind: ConfigMap
metadata:
  name: reasoning-long-predictor
data: {x: "1"}
"""


def test_multi_document_and_flow_style() -> None:
    result = edit(MULTI, {"app": "b", "tier": "true"})
    assert changed_lines(MULTI, result.after) == [
        '-  selector: {app: a, tier: "1.0"}  # flow style',
        '+  selector: {app: b, tier: "true"}  # flow style',
    ]


def test_crlf_files_stay_crlf_and_values_yaml_would_misread_are_quoted() -> None:
    text = FIXTURE.replace("\n", "\r\n")
    result = edit(text, {**CANDLE, "gpu": "on", "version": "1.10", "date": "2026-01-01"})
    assert "\r\n" in result.after and "\n" not in result.after.replace("\r\n", "")
    added = [line for line in result.after.split("\r\n") if line.startswith(("    gpu", "    version", "    date"))]
    assert added == ['    gpu: "on"', '    version: "1.10"', '    date: "2026-01-01"']


def test_no_final_newline_stays_without_one() -> None:
    text = "kind: Service\nmetadata: {name: s}\nspec:\n  selector:\n    a: b"
    result = edit(text, {"a": "c", "d": "e"}, GitDocument("Service", "s"))
    assert result.after == "kind: Service\nmetadata: {name: s}\nspec:\n  selector:\n    a: c\n    d: e"


def test_a_quoted_value_keeps_its_quotes() -> None:
    text = "kind: Service\nmetadata: {name: s}\nspec:\n  selector:\n    'a': 'b'   # q\n"
    result = edit(text, {"a": "c"}, GitDocument("Service", "s"))
    assert result.after.endswith("    'a': 'c'   # q\n")


def test_a_selector_under_another_path() -> None:
    text = "kind: HelmValues\nmetadata: {name: v}\nservice:\n  engine:\n    selector:\n      a: b\n"
    result = edit(text, {"a": "c"}, GitDocument("HelmValues", "v"), "service.engine.selector")
    assert result.after.endswith("      a: c\n")


BAD = [
    ("not yaml", "kind: [unclosed\n", "not valid YAML", "invalid_file"),
    ("no such document", FIXTURE.replace("kind: Service", "kind: Deployment"),
     "no document with kind Service and metadata.name reasoning-long-predictor", "document_not_found"),
    ("two documents", FIXTURE + "---\n" + FIXTURE, "2 documents match", "document_ambiguous"),
    ("path missing", FIXTURE.replace("  selector:", "  chooser:"), "spec.selector: missing", "selector_path_missing"),
    ("not a mapping", "kind: Service\nmetadata: {name: reasoning-long-predictor}\nspec:\n  selector: [a, b]\n",
     "expected a mapping of labels, found CommentedSeq", "selector_not_mapping"),
    ("an anchor", "kind: Service\nmetadata: {name: reasoning-long-predictor}\nspec:\n  selector: &s\n    a: b\n",
     "uses YAML anchors or aliases", "selector_alias"),
    ("an alias", "x: &s\n  a: b\n---\nkind: Service\nmetadata: {name: reasoning-long-predictor}\n"
                 "spec:\n  selector: *s\n", "not valid YAML", "invalid_file"),  # aliases do not cross documents
    ("an alias in one document", "kind: Service\nmetadata: {name: reasoning-long-predictor}\nx: &s\n  a: b\n"
                                 "spec:\n  selector: *s\n", "uses YAML anchors or aliases", "selector_alias"),
    ("a duplicate key", FIXTURE.replace("    component: predictor\n", "    component: predictor\n"
                                                                      "    component: other\n"),
     "a duplicate key", "invalid_file"),
    ("a tab", FIXTURE.replace("    component: predictor", "\tcomponent: predictor"), "line 32: a tab in the "
                                                                                     "indentation", "invalid_file"),
    ("a non-string label", FIXTURE.replace("component: predictor", "component: 1.0"),
     "has a value that is not a string", "selector_not_mapping"),
    # libyaml recurses on the C stack: 100,000 compact levels end the process without a word unless refused first
    ("100,000 levels of `- `", FIXTURE + "---\nx:\n" + "- " * 100_000 + "y\n", "nested deeper than 200",
     "invalid_file"),
    ("1,000 flow levels", FIXTURE + "---\nx: " + "{a: " * 1000 + "b" + "}" * 1000 + "\n", "nested deeper than 200",
     "invalid_file"),
]


@pytest.mark.parametrize(("why", "text", "words", "cause"), BAD, ids=[case[0] for case in BAD])
def test_bad_files_are_refused_with_a_precise_message(why: str, text: str, words: str, cause: str) -> None:
    with pytest.raises(InvalidInput) as caught:
        edit(text, CANDLE)
    assert words in caught.value.message and caught.value.message.startswith("svc.yaml: ")
    assert caught.value.cause == cause and caught.value.exit_code == 2


def test_invalid_label_syntax_is_refused() -> None:
    with pytest.raises(InvalidInput, match="label value 'not ok' holds ' ': only alphanumerics"):
        edit(FIXTURE, {"app": "not ok"})


def test_the_guard_refuses_an_edit_outside_the_selector() -> None:
    good = edit(FIXTURE, CANDLE)
    sneaky = yaml_edit.SelectorEdit(FIXTURE, good.after.replace("port: 80 ", "port: 81 "), good.old, good.new)
    with pytest.raises(yaml_edit.GuardFailed, match="changed the target document outside the selector"):
        yaml_edit.guard(sneaky, document=SERVICE, selector_path="spec.selector")
    comment_only = yaml_edit.SelectorEdit(FIXTURE, good.after.replace("# Ports:", "# Port list:"), good.old, good.new)
    with pytest.raises(yaml_edit.GuardFailed, match="outside the selector block"):
        yaml_edit.guard(comment_only, document=SERVICE, selector_path="spec.selector")


@pytest.mark.parametrize(("value", "rendered"), [
    ("predictor", "predictor"), ("true", '"true"'), ("on", '"on"'), ("No", '"No"'), ("1.0", '"1.0"'),
    ("10", '"10"'), ("1e3", '"1e3"'), ("0x1F", '"0x1F"'), ("null", '"null"'), ("", '""'),
    ("2026-01-01", '"2026-01-01"'), ("v1.0", "v1.0"), ("a_b.c-d", "a_b.c-d"), ("-lead", '"-lead"'),
])
def test_scalars_that_yaml_would_misread_are_quoted(value: str, rendered: str) -> None:
    assert yaml_edit.render_scalar(value) == rendered


# --- property: comments anywhere survive, and the guard holds ---------------------------------------

LABEL = st.from_regex(r"[a-z][a-z0-9]{0,6}", fullmatch=True)
VALUE = st.one_of(st.from_regex(r"[a-z0-9][a-z0-9.-]{0,6}[a-z0-9]", fullmatch=True),
                  st.sampled_from(["true", "on", "1.0", "10", "null", "yes"]))
SELECTOR = st.dictionaries(LABEL, VALUE, min_size=1, max_size=4)
COMMENT = st.from_regex(r"# [a-z ]{0,12}", fullmatch=True)


@st.composite
def service_files(draw: st.DrawFn) -> tuple[str, dict[str, str]]:
    selector = draw(SELECTOR)
    body = ["apiVersion: v1", "kind: Service", "metadata:", "  name: s", "spec:", "  type: ClusterIP",
            "  selector:"]
    body += [f"    {key}: {yaml_edit.render_scalar(value)}" for key, value in selector.items()]
    body += ["  ports:", "    - port: 80", "      targetPort: 8080"]
    lines: list[str] = []
    for line in body:
        if draw(st.booleans()):  # a full-line comment before it, at its indentation
            lines.append(" " * (len(line) - len(line.lstrip())) + draw(COMMENT))
        lines.append(line + (f"  {draw(COMMENT)}" if draw(st.booleans()) else ""))
    return "\n".join(lines) + "\n", selector


@settings(max_examples=150, deadline=None)
@given(service_files(), SELECTOR)
def test_comments_survive_and_only_selector_lines_change(case: tuple[str, dict[str, str]],
                                                         new: dict[str, str]) -> None:
    text, _ = case
    result = yaml_edit.edit_selector(text, document=GitDocument("Service", "s"), selector_path="spec.selector",
                                    selector=new)
    assert yaml_edit.read_selector(result.after, document=GitDocument("Service", "s"),
                                  selector_path="spec.selector") == new
    kept = [line for line in text.splitlines() if line.lstrip().startswith("#")]
    assert all(line in result.after.splitlines() for line in kept)  # every full-line comment survives
    outside = [line for line in text.splitlines() if not line.startswith("    ") or line.lstrip().startswith("#")]
    assert [line for line in result.after.splitlines() if line in outside] == outside
