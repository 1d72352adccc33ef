"""The render check as a table (pure): what ArgoCD would apply after the edit against what it applies now."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from cutover.sources import render_check

WANTED = {"app": "chat-candle", "component": "predictor", "env": "prod"}


def service(selector: dict[str, str], *, namespace: str | None = "llm-serving", **spec: Any) -> dict[str, Any]:
    meta = {"name": "chat", **({"namespace": namespace} if namespace else {})}
    return {"apiVersion": "v1", "kind": "Service", "metadata": meta,
            "spec": {"selector": selector, "ports": [{"port": 80}], **spec}}


CONFIG = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "chat", "namespace": "llm-serving"},
          "data": {"model": "chat"}}
CURRENT = [service({"app": "chat-vllm", "component": "predictor", "env": "prod"}), CONFIG]


def check(candidate: list[dict[str, Any]], *, written: dict[str, str] | None = None) -> None:
    render_check.check(CURRENT, candidate, namespace="llm-serving", name="chat", wanted=WANTED,
                   written=written if written is not None else {"app": "chat-candle"}, where="overlays/prod")


def test_the_switch_and_nothing_else_passes() -> None:
    check([service(dict(WANTED)), CONFIG])
    unset = [service(dict(CURRENT[0]["spec"]["selector"]), namespace=None), CONFIG]
    render_check.check(unset, [service(dict(WANTED), namespace=None), CONFIG], namespace="llm-serving", name="chat",
                   wanted=WANTED, written=WANTED, where="base")  # no namespace: the Application's applies


@pytest.mark.parametrize(("candidate", "words"), [
    ([CONFIG], "expected exactly one Service llm-serving/chat in the rendered output, found 0"),
    ([service(dict(WANTED)), service(dict(WANTED), namespace=None), CONFIG], "found 2"),
    ([service({**WANTED, "tier": "gpu"}), CONFIG], "the build adds component=predictor,env=prod,tier=gpu beyond"),
    ([service({"app": "chat-vllm", "component": "predictor", "env": "prod"}), CONFIG],
     "selects app=chat-vllm,component=predictor,env=prod, not app=chat-candle"),
    ([service(dict(WANTED)), {**CONFIG, "data": {"model": "other"}}], "changes more than the selector"
                                                                      " in the rendered output: ConfigMap/chat"),
    ([service(dict(WANTED), type="NodePort"), CONFIG], "Service/chat beyond its selector"),
    ([service(dict(WANTED))], "ConfigMap/chat"),  # an object gone is a change too
], ids=["no-service", "two-services", "build-adds-a-label", "selector-unchanged", "another-object-changes",
        "service-beyond-selector", "object-gone"])
def test_anything_else_is_a_mismatch_naming_what(candidate: list[dict[str, Any]], words: str) -> None:
    with pytest.raises(render_check.RenderMismatch) as caught:
        check(candidate)
    assert words in caught.value.message and caught.value.exit_code == 2 and caught.value.cause == "render_mismatch"


def test_what_the_file_holds_is_not_blamed_on_the_build() -> None:
    with pytest.raises(render_check.RenderMismatch) as caught:
        check([service({**WANTED, "tier": "gpu"}), CONFIG], written={**WANTED, "tier": "gpu"})
    assert "the build adds" not in caught.value.message  # tier came from the file itself


def test_the_check_reads_its_inputs_only() -> None:
    candidate = [service(dict(WANTED)), CONFIG]
    before = copy.deepcopy((CURRENT, candidate))
    check(candidate)
    assert (CURRENT, candidate) == before


def test_shown() -> None:
    assert render_check.shown({"a": "b", "c": "d"}) == "a=b,c=d" and render_check.shown({}) == "(empty)"
