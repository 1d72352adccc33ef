"""The plan file: a good plan reads into the model; every bad plan names the field, the expectation and
what was found (docs/plan.md)."""

from __future__ import annotations

import dataclasses
import re
import textwrap
from pathlib import Path

import pytest

from cutover import plan
from cutover.errors import ExitCode, InvalidInput
from plans import BAD, FLEET, GOOD, THREE, edit


def test_the_spec_example_reads_into_the_model() -> None:
    (one,) = plan.parse(GOOD)
    assert one.name == "reasoning-long"
    assert one.service.ports == (80, 8080)
    assert one.backends["candle"].selector == {"app.kubernetes.io/name": "llm-reasoning-candle",
                                               "component": "predictor"}
    assert one.backends["candle"].engine == "candle-vllm"
    assert one.target == "candle"
    assert one.verify.max_wait == 1800.0
    assert one.verify.request_timeout == 10.0
    assert one.verify.served_names == ("reasoning-long", "reasoning")
    assert one.git.document == plan.GitDocument("Service", "reasoning-long-predictor")
    assert one.argocd == plan.ArgoCD("llm-serving", "argocd", True)
    assert one.slack is not None and one.slack.webhook_file == "/var/run/secrets/cutover/slack/webhook"


def test_defaults_fill_what_the_spec_leaves_optional() -> None:
    text = GOOD.replace("  proof: auto\n  minReadyPods: 1\n  maxWait: 30m\n  requestTimeout: 10s\n", "")
    (one,) = plan.parse(text.split("argocd:")[0])
    assert one.verify == plan.Verify(served_names=("reasoning-long", "reasoning"))
    assert one.argocd is None and one.rollback_auto is True and one.slack is None


@pytest.mark.parametrize(("value", "refresh", "always"), [("true", True, False), ("false", False, False),
                                                          ("always", True, True)])
def test_the_refresh_is_asked_for_after_a_sync_never_or_always(value: str, refresh: bool, always: bool) -> None:
    """`always` also asks while ArgoCD's operation runs: for an ArgoCD with the fixed self-heal delay."""
    (read,) = plan.parse(edit("  refresh: true\n", f"  refresh: {value}\n"))
    assert read.argocd is not None
    assert (read.argocd.refresh, read.argocd.refresh_always) == (refresh, always)


def test_a_backend_may_name_the_model_its_pods_must_report() -> None:
    (read,) = plan.parse(edit("    engine: candle-vllm\n", "    engine: candle-vllm\n    model: Qwen/Qwen3-8B\n"))
    assert read.backends["candle"].model == "Qwen/Qwen3-8B" and read.backends["vllm"].model is None


def test_several_services_under_cutovers() -> None:
    body = GOOD.split("kind: CutoverPlan\n", 1)[1]
    second = body.replace("name: reasoning-long-predictor", "name: chat-predictor").replace(
        "name: reasoning-long\n", "name: chat\n")
    text = "apiVersion: cutover/v1alpha1\nkind: CutoverPlan\ncutovers:\n" + "".join(
        "  - " + textwrap.indent(doc, "    ").lstrip() for doc in (body, second))
    plans = plan.parse(text)
    assert [p.name for p in plans] == ["reasoning-long", "chat"]
    assert [p.service.name for p in plans] == ["reasoning-long-predictor", "chat-predictor"]


def test_where_credentials_may_come_from_and_go(monkeypatch: pytest.MonkeyPatch) -> None:
    """The Git token to git.url's host, api.github.com for github.com, or a host git.apiHosts names; credential
    files under the Secrets' mount, or under CUTOVER_SECRETS_DIR where a run names another."""
    (public,) = plan.parse(edit("  apiUrl: null\n", "  apiUrl: https://api.github.com\n"))
    assert public.git.api_url == "https://api.github.com"
    (listed,) = plan.parse(edit("  apiUrl: null\n", "  apiUrl: https://git-api.internal/v3\n"
                                                    "  apiHosts: [git-api.internal]\n"))
    assert listed.git.api_url == "https://git-api.internal/v3"
    monkeypatch.setenv("CUTOVER_SECRETS_DIR", "/home/me/.config/cutover/")
    (local,) = plan.parse(GOOD.replace("/var/run/secrets/cutover/", "/home/me/.config/cutover/"))
    assert local.git.token_file == "/home/me/.config/cutover/git/token"
    (mounted,) = plan.parse(GOOD)  # the plan the Jobs mount, run from a person's machine: read under that root
    assert mounted.git.token_file == "/home/me/.config/cutover/git/token"
    with pytest.raises(InvalidInput, match=r"a file under /home/me/\.config/cutover/git/"):
        plan.parse(GOOD.replace("/var/run/secrets/cutover/git/token", "/etc/passwd"))


@pytest.mark.parametrize(("text", "expected"), [
    ("90s", 90.0), ("30m", 1800.0), ("1h", 3600.0), ("1h30m", 5400.0), ("2m5s", 125.0), ("500ms", 0.5),
    ("2s500ms", 2.5), ("1m", 60.0),
])
def test_durations(text: str, expected: float) -> None:
    assert plan.parse_duration(text) == expected


def test_fitness_defaults_and_values() -> None:
    (off,) = plan.parse(GOOD)
    assert off.verify.fitness is None  # absent: the names alone decide, as before
    (defaults,) = plan.parse(edit("  requestTimeout: 10s\n", "  requestTimeout: 10s\n  fitness: {}\n"))
    assert defaults.verify.fitness == plan.Fitness(requests=3, max_latency=5.0, stream=True, compare=True)
    (empty,) = plan.parse(edit("  requestTimeout: 10s\n", "  requestTimeout: 10s\n  fitness:\n"))
    assert empty.verify.fitness == plan.Fitness()
    (chosen,) = plan.parse(edit("  requestTimeout: 10s\n", "  requestTimeout: 10s\n  fitness: {requests: 20, "
                                                             "maxLatency: 750ms, stream: false, compare: false}\n"))
    assert chosen.verify.fitness == plan.Fitness(requests=20, max_latency=0.75, stream=False, compare=False)




@pytest.mark.parametrize(("why", "text", "field", "words"), BAD, ids=[case[0] for case in BAD])
def test_bad_plans_name_the_field_and_what_was_found(why: str, text: str, field: str, words: str) -> None:
    with pytest.raises(InvalidInput) as caught:
        plan.parse(text, source="plan.yaml")
    message = caught.value.message
    assert message.startswith(f"plan.yaml: {field}: expected "), message
    assert "L" * 36 not in message and "S" * 40 not in message and "hunter2" not in message  # never echoed
    assert words in message, message
    assert caught.value.exit_code == ExitCode.INVALID_INPUT
    assert caught.value.hint


def test_not_yaml_at_all() -> None:
    with pytest.raises(InvalidInput, match=r"^plan.yaml: not valid YAML: ") as caught:
        plan.parse("service: [unclosed\n", source="plan.yaml")
    assert caught.value.cause == "invalid_plan"  # as docs/causes.md says, not invalid_input


def test_duplicate_keys_are_refused() -> None:
    with pytest.raises(InvalidInput, match=r"not valid YAML: .*duplicate key") as caught:
        plan.parse(GOOD + "target: vllm\n", source="plan.yaml")
    assert caught.value.cause == "invalid_plan" and "yaml.dev" not in caught.value.message


def test_a_missing_file_says_where_it_looked(tmp_path: object) -> None:
    with pytest.raises(InvalidInput, match=re.escape("plan /nowhere/plan.yaml: file not found")):
        plan.load("/nowhere/plan.yaml")


def test_one_service_twice_under_cutovers() -> None:
    body = GOOD.split("kind: CutoverPlan\n", 1)[1]
    text = "apiVersion: cutover/v1alpha1\nkind: CutoverPlan\ncutovers:\n" + "".join(
        "  - " + textwrap.indent(body, "    ").lstrip() for _ in range(2))
    with pytest.raises(InvalidInput, match=r"cutovers\[1\]\.service: expected a Service not already handled"):
        plan.parse(text)


def test_the_bad_plan_corpus_is_large_enough() -> None:
    assert len(BAD) >= 15


def test_the_plan_configmap_itself_is_a_plan_file() -> None:
    """--plan takes the ConfigMap a Job mounts (its data."plan.yaml"), as the example ships it (docs/plan.md)."""
    example = Path(__file__).parents[2] / "manifests" / "examples" / "llm-serving" / "workload" / "plan-configmap.yaml"
    (one,) = plan.parse(example.read_text(), source="plan-configmap.yaml")
    assert one.name == "reasoning-long" and one.target == "vllm"  # the Service's backend: the first sync moves nothing
    broken = example.read_text().replace("    target: vllm", "    targett: vllm", 1)
    with pytest.raises(InvalidInput, match=r"^plan-configmap.yaml \(data.plan.yaml\): targett: expected"):
        plan.parse(broken, source="plan-configmap.yaml")


def test_the_plans_names_are_the_registries_rows() -> None:
    """The plan owns the vocabulary, the wings its classes: a name without a class (or the reverse) is caught here."""
    from cutover import githost, sources
    from cutover.engines import kinds

    assert tuple(githost.PROVIDERS) == plan.PROVIDERS
    assert tuple(kinds.ENGINES) == plan.ENGINES
    assert tuple(sources.SOURCES) == tuple(plan.SOURCES)
    assert set(plan.PUBLIC_HOSTS.values()) <= set(plan.PROVIDERS)
    assert [name for name, kind in sources.SOURCES.items() if kind.renders_itself] == ["kustomize"]
    assert [name for name, kind in sources.SOURCES.items() if kind.needs_kustomize] == ["kustomize"]


def test_handoff_defaults_to_parallel_and_reads_its_keys() -> None:
    (one,) = plan.parse(GOOD)
    assert one.handoff == plan.Handoff(strategy="parallel", drain_timeout=300.0)
    (timed,) = plan.parse(GOOD + "handoff: {strategy: parallel, drainTimeout: 2m}\n")
    assert timed.handoff.drain_timeout == 120.0 and timed.handoff.bridge is None


def test_retire_is_read_with_every_workload() -> None:
    """handoff.retire frees the backend a switch left once `after` has passed: each backend names its workload."""
    with pytest.raises(InvalidInput) as caught:
        plan.parse(GOOD + "handoff: {retire: {after: 24h}}\n", source="plan.yaml")
    assert caught.value.message.startswith("plan.yaml: backends.vllm.workload: expected the workload") and \
        "(handoff.retire frees and restores it)" in caught.value.message
    named = edit("    engine: vllm\n", "    engine: vllm\n    workload: {kind: Deployment, name: llm-reasoning}\n")
    named = named.replace("    engine: candle-vllm\n", "    engine: candle-vllm\n    workload: {kind: Deployment, "
                                                         "name: candle}\n")
    (one,) = plan.parse(named + "handoff: {retire: {after: 24h}}\n")
    assert one.handoff == plan.Handoff(retire_after=86400.0)


def test_recreate_is_read_with_its_consent_and_every_workload() -> None:
    named = edit("    engine: vllm\n", "    engine: vllm\n    workload: {kind: Deployment, name: llm-reasoning}\n")
    named = named.replace("    engine: candle-vllm\n", "    engine: candle-vllm\n    workload: {kind: Deployment, "
                                                         "name: candle}\n")
    (one,) = plan.parse(named + "handoff: {strategy: recreate, maxGap: 45m, drainTimeout: 2m}\n")
    assert one.handoff == plan.Handoff(strategy="recreate", max_gap=2700.0, drain_timeout=120.0)
    half = edit("    engine: vllm\n", "    engine: vllm\n    workload: {kind: Deployment, name: llm-reasoning}\n")
    with pytest.raises(InvalidInput) as caught:
        plan.parse(half + "handoff: {strategy: recreate, maxGap: 45m}\n", source="plan.yaml")
    assert caught.value.message.startswith("plan.yaml: backends.candle.workload: expected the workload") and \
        caught.value.exit_code == ExitCode.INVALID_INPUT


def test_bridge_is_read_with_a_third_backend_and_the_workloads_it_frees() -> None:
    three = THREE.replace("    engine: vllm\n", "    engine: vllm\n    workload: {kind: Deployment, "
                                              "name: llm-reasoning}\n", 1)
    with pytest.raises(InvalidInput) as caught:
        plan.parse(three + "handoff: {strategy: bridge, bridge: coder}\n", source="plan.yaml")
    assert caught.value.message.startswith("plan.yaml: backends.candle.workload: expected the workload") and \
        "strategy bridge frees and restores it" in caught.value.message
    named = three.replace("    engine: candle-vllm\n", "    engine: candle-vllm\n    workload: {kind: Deployment, "
                                                         "name: candle}\n")
    (one,) = plan.parse(named + "handoff: {strategy: bridge, bridge: coder, bridgeNames: [reasoning], maxGap: 45m}\n")
    assert one.handoff == plan.Handoff(strategy="bridge", bridge="coder", bridge_names=("reasoning",), max_gap=2700.0)
    assert one.dark_names == ("reasoning-long",)
    assert one.backends["coder"].workload is None  # the bridge is never freed
    bridged = one.for_bridge()
    assert bridged.verify.served_names == ("reasoning",) and one.verify.served_names == ("reasoning-long", "reasoning")


def test_a_backend_names_what_holds_its_gpus() -> None:
    (one,) = plan.parse(edit("    engine: vllm\n", "    engine: vllm\n    workload: {kind: InferenceService, "
                                                    "name: reasoning, path: k8s/isvc.yaml}\n"))
    assert one.backends["vllm"].workload == plan.Workload("InferenceService", "reasoning", "k8s/isvc.yaml")
    assert one.backends["candle"].workload is None
    (values,) = plan.parse(edit("    engine: vllm\n", "    engine: vllm\n    workload: {kind: Deployment, name: v, "
                                                       "path: values.yaml, valuesKey: engine.vllm.replicas}\n"))
    assert values.backends["vllm"].workload == plan.Workload("Deployment", "v", "values.yaml", "engine.vllm.replicas")


def test_the_whole_shape_the_docs_show_is_a_plan() -> None:
    """docs/plan.md's example of every section: copied by people, so it reads as a plan, with the example Service's
    three labels on vllm (a newcomer found two)."""
    docs = (Path(__file__).parents[2] / "docs" / "plan.md").read_text()
    block = docs.split("## The whole shape", 1)[1].split("```yaml", 1)[1].split("```", 1)[0]
    (shown,) = plan.parse(block, source="docs/plan.md")
    assert len(shown.backends["vllm"].selector) == 3 and shown.target == "candle"


@pytest.mark.parametrize("text", ["ghp_" + "s" * 36 + "\n", "0123456789abcdef0123456789abcdef01234567\n",
                                  "- hunter2hunter2\n", "'unterminated hunter2hunter2\n"])
def test_a_file_that_is_no_plan_is_described_never_quoted(text: str) -> None:
    """The review's N2: a plan path that names a Secret's file (CUTOVER_PLAN under /etc/cutover/) once had up to 60
    of its characters quoted in the outcome line, which ArgoCD shows as the hook's message."""
    with pytest.raises(InvalidInput) as caught:
        plan.parse(text, source="/etc/cutover/../t")
    said = caught.value.message + caught.value.hint
    assert caught.value.exit_code == ExitCode.INVALID_INPUT and "hunter2" not in said and "sss" not in said
    assert "0123456789" not in said


def test_a_hint_names_the_namespace_of_the_workloads_own_jobs() -> None:
    """Issue 54's C1: a further workload's Jobs live in its own credentials namespace (cutover-<application>), which
    the CLI takes from the pod's own (POD_NAMESPACE) in a pod: every hint that says how to run a Job names it."""
    (one,) = plan.parse(GOOD)
    assert "kubectl -n cutover create job --from=cronjob/cutover-rollback-llm-serving" in one.job("rollback")
    there = dataclasses.replace(one, jobs_namespace="cutover-chat-prod")
    assert "kubectl -n cutover-chat-prod create job" in there.job("run")


def test_a_fleets_plan_names_no_target_until_a_revision_aims_it() -> None:
    """docs/fleet.md: the fleet's commit chooses the backend; a sync's revision aims the plan at it."""
    (fleet,) = plan.parse(FLEET)
    assert fleet.fleet and fleet.target == "" and not fleet.rollback_auto
    assert fleet.aimed("vllm").target == "vllm" and fleet.aimed("vllm").fleet
    with pytest.raises(InvalidInput, match="--backend: expected one of"):
        fleet.aimed("sglang")
    (single,) = plan.parse(GOOD)
    assert not single.fleet and single.target == "candle"
    # one plan for every cluster: each hook finds its Application in ArgoCD's tracking on its own Job
    (shared,) = plan.parse(FLEET.replace("  application: llm-serving\n", ""))
    assert shared.argocd is not None and shared.argocd.application == ""
    with pytest.raises(InvalidInput, match=r"argocd\.application: expected a value"):
        plan.parse(GOOD.replace("  application: llm-serving\n", ""))  # a single cluster's names it
