"""A Helm values key, read and edited in place (comments, quoting and every other byte kept, a guard behind it),
and the helm-values source on top of it."""

from __future__ import annotations

import dataclasses

import pytest

from cutover import plan
from cutover.core.repository import FileVersion
from cutover.demo.world import World
from cutover.errors import InvalidInput
from cutover.sources import yaml_edit
from cutover.sources.helm import HelmValuesSource

VALUES = """# values of the llm chart
engine: "vllm"   # vllm | candle: the chart selects the engine's pods by it
replicas: 2
service:
  selector:
    app: chat
  port: 80
"""


def test_a_scalar_is_replaced_in_place_with_its_quotes_and_comment() -> None:
    edit = yaml_edit.edit_value(VALUES, value_path="engine", value="candle")
    assert edit.after == VALUES.replace('"vllm"', '"candle"')
    assert yaml_edit.read_value(edit.after, value_path="engine") == "candle"
    assert yaml_edit.edit_value(VALUES, value_path="engine", value="vllm").after == VALUES  # nothing to change


def test_a_number_and_a_nested_key() -> None:
    assert yaml_edit.edit_value(VALUES, value_path="service.port", value="8080").after == VALUES.replace(
        "port: 80", "port: 8080")
    assert yaml_edit.read_value(VALUES, value_path="service.selector") == {"app": "chat"}


@pytest.mark.parametrize(("text", "path", "cause"), [
    (VALUES, "missing", "selector_path_missing"),
    ("engines: [vllm, candle]\n", "engines", "selector_not_mapping"),
    ("engine: vllm\n---\nengine: candle\n", "engine", "document_ambiguous"),
    ("base: &engine vllm\nengine: *engine\n", "engine", "selector_alias"),
])
def test_what_cannot_be_edited_safely_is_refused(text: str, path: str, cause: str) -> None:
    with pytest.raises(InvalidInput) as caught:
        yaml_edit.edit_value(text, value_path=path, value="candle")
    assert caught.value.cause == cause


def _source(path: str, values: dict[str, str] | None) -> HelmValuesSource:
    world = World.__new__(World)
    world.port = 8080
    (the_plan,) = plan.parse(world.plan_text(git_path="values.yaml", git_values=values,
                                             git_more=f"source: helm-values\nselectorPath: {path}"))
    return HelmValuesSource.from_settings(the_plan.git, plan=the_plan)


async def test_the_scalar_stands_for_a_backends_selector() -> None:
    source = _source("engine", {"vllm": "vllm", "candle": "candle"})
    version = FileVersion(VALUES, "v1")
    assert await source.selector(version, ref=None, where="values.yaml") == dict(source.backends["vllm"].selector)
    candle = dict(source.backends["candle"].selector)
    edit = await source.edit(version, candle, where="values.yaml")
    assert 'engine: "candle"' in edit.after and dict(edit.new) == candle
    assert source.rewrite(VALUES, candle, where="values.yaml").after == edit.after  # a pull request's branch
    other = FileVersion(VALUES.replace('"vllm"', '"tgi"'), "v2")
    assert await source.selector(other, ref=None, where="values.yaml") == {"engine": "tgi"}  # no backend's


async def test_a_mapping_is_the_selector_itself() -> None:
    source = _source("service.selector", None)
    version = FileVersion(VALUES, "v1")
    assert await source.selector(version, ref=None, where="values.yaml") == {"app": "chat"}
    edit = await source.edit(version, {"app": "chat", "engine": "candle"}, where="values.yaml")
    assert "    app: chat\n    engine: candle\n  port: 80\n" in edit.after


def test_gitvalues_are_validated_in_the_plan() -> None:
    backends = _source("engine", {"vllm": "vllm", "candle": "candle"}).backends
    assert {name: backend.git_value for name, backend in backends.items()} == {"vllm": "vllm", "candle": "candle"}
    assert dataclasses.replace(backends["vllm"], git_value=None).git_value is None


@pytest.mark.parametrize("text", [
    "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: team-b\n  labels:\n    enforce: restricted\n",
    "kind: Secret\napiVersion: v1\nmetadata:\n  labels:\n    enforce: restricted\n",
])
def test_a_kubernetes_object_is_never_read_as_a_values_file(text: str) -> None:
    """The review's F3: a helm-values plan aimed at another team's Namespace turned its Pod Security label from
    restricted to privileged. A values key lives in a values file, never in an object."""
    for act in (lambda: yaml_edit.read_value(text, value_path="metadata.labels.enforce", source="ns.yaml"),
                lambda: yaml_edit.edit_value(text, value_path="metadata.labels.enforce", value="privileged",
                                             source="ns.yaml")):
        with pytest.raises(InvalidInput) as caught:
            act()
        assert caught.value.cause == "not_values_file" and "restricted" not in str(caught.value)


def test_a_values_file_may_hold_a_kind_of_its_own() -> None:
    """Charts choose their workload's kind in their values (`kind: DaemonSet`): that alone is no object."""
    text = "kind: DaemonSet\nengine: vllm\n"
    assert yaml_edit.edit_value(text, value_path="engine", value="candle").after == text.replace("vllm", "candle")
