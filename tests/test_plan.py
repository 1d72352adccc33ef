"""The plan file: a good plan reads into the model; every bad plan names the field, the expectation and
what was found (docs/plan.md)."""

from __future__ import annotations

import re
import textwrap
from pathlib import Path

import pytest

from cutover import plan
from cutover.errors import ExitCode, InvalidInput

GOOD = textwrap.dedent("""\
    apiVersion: cutover/v1alpha1
    kind: CutoverPlan
    metadata:
      name: reasoning-long
    service:
      namespace: llm-serving
      name: reasoning-long-predictor
      ports: [80, 8080]
    backends:
      vllm:
        selector:
          app.kubernetes.io/name: llm-reasoning
          component: predictor
          serving.kserve.io/inferenceservice: reasoning
        engine: vllm
        port: 8080
      candle:
        selector:
          app.kubernetes.io/name: llm-reasoning-candle
          component: predictor
        engine: candle-vllm
        port: 8080
    target: candle
    verify:
      servedNames: [reasoning-long, reasoning]
      proof: auto
      minReadyPods: 1
      maxWait: 30m
      requestTimeout: 10s
    git:
      provider: github
      url: https://github.com/acme/gitops.git
      apiUrl: null
      allowInsecure: false
      branch: main
      path: k8s/apps/llm-serving/reasoning-long-service.yaml
      document: {kind: Service, name: reasoning-long-predictor}
      selectorPath: spec.selector
      mode: direct
      author: {name: cutover, email: cutover@example.invalid}
      tokenFile: /var/run/secrets/cutover/git/token
    argocd:
      application: llm-serving
      namespace: argocd
      refresh: true
    rollback:
      auto: true
    notify:
      slack:
        webhookFile: /var/run/secrets/cutover/slack/webhook
        minLevel: info
    """)


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
    (public,) = plan.parse(_edit("  apiUrl: null\n", "  apiUrl: https://api.github.com\n"))
    assert public.git.api_url == "https://api.github.com"
    (listed,) = plan.parse(_edit("  apiUrl: null\n", "  apiUrl: https://git-api.internal/v3\n"
                                                    "  apiHosts: [git-api.internal]\n"))
    assert listed.git.api_url == "https://git-api.internal/v3"
    monkeypatch.setenv("CUTOVER_SECRETS_DIR", "/home/me/.config/cutover/")
    (local,) = plan.parse(GOOD.replace("/var/run/secrets/cutover/", "/home/me/.config/cutover/"))
    assert local.git.token_file == "/home/me/.config/cutover/git/token"
    with pytest.raises(InvalidInput, match=r"a file under /home/me/\.config/cutover/"):
        plan.parse(GOOD)


@pytest.mark.parametrize(("text", "expected"), [
    ("90s", 90.0), ("30m", 1800.0), ("1h", 3600.0), ("1h30m", 5400.0), ("2m5s", 125.0), ("500ms", 0.5),
    ("2s500ms", 2.5), ("1m", 60.0),
])
def test_durations(text: str, expected: float) -> None:
    assert plan.parse_duration(text) == expected


def test_fitness_defaults_and_values() -> None:
    (off,) = plan.parse(GOOD)
    assert off.verify.fitness is None  # absent: the names alone decide, as before
    (defaults,) = plan.parse(_edit("  requestTimeout: 10s\n", "  requestTimeout: 10s\n  fitness: {}\n"))
    assert defaults.verify.fitness == plan.Fitness(requests=3, max_latency=5.0, stream=True, compare=True)
    (empty,) = plan.parse(_edit("  requestTimeout: 10s\n", "  requestTimeout: 10s\n  fitness:\n"))
    assert empty.verify.fitness == plan.Fitness()
    (chosen,) = plan.parse(_edit("  requestTimeout: 10s\n", "  requestTimeout: 10s\n  fitness: {requests: 20, "
                                                             "maxLatency: 750ms, stream: false, compare: false}\n"))
    assert chosen.verify.fitness == plan.Fitness(requests=20, max_latency=0.75, stream=False, compare=False)


def _edit(old: str, new: str) -> str:
    assert old in GOOD, old
    return GOOD.replace(old, new, 1)


# (what is wrong, the edited plan, the field path, words that must be in the message)
BAD = [
    ("unknown top-level key", GOOD + "extra: 1\n", "extra", "no such key"),
    ("unknown nested key", _edit("  minReadyPods: 1\n", "  minReadyPods: 1\n  maxWiat: 5m\n"),
     "verify.maxWiat", "no such key (known here: servedNames, proof, minReadyPods, maxWait, requestTimeout, "
                       "fitness)"),
    # verify.fitness (docs/fitness.md)
    ("fitness requests below 1", _edit("  requestTimeout: 10s\n", "  requestTimeout: 10s\n  fitness: {requests: 0}\n"),
     "verify.fitness.requests", "an integer from 1 to 20, found 0"),
    ("fitness requests above 20", _edit("  requestTimeout: 10s\n",
                                        "  requestTimeout: 10s\n  fitness: {requests: 21}\n"),
     "verify.fitness.requests", "an integer from 1 to 20, found 21"),
    ("fitness maxLatency not a duration", _edit("  requestTimeout: 10s\n",
                                                "  requestTimeout: 10s\n  fitness: {maxLatency: fast}\n"),
     "verify.fitness.maxLatency", "a duration string like '90s', '30m', '1h', '1h30m' or '500ms', found 'fast'"),
    ("fitness maxLatency zero", _edit("  requestTimeout: 10s\n",
                                      "  requestTimeout: 10s\n  fitness: {maxLatency: 0s}\n"),
     "verify.fitness.maxLatency", "a duration above zero, found '0s'"),
    ("fitness maxLatency a number", _edit("  requestTimeout: 10s\n",
                                          "  requestTimeout: 10s\n  fitness: {maxLatency: 5}\n"),
     "verify.fitness.maxLatency", "found 5 (an integer)"),
    ("fitness unknown key", _edit("  requestTimeout: 10s\n",
                                  "  requestTimeout: 10s\n  fitness: {stream: true, p99: 2s}\n"),
     "verify.fitness.p99", "no such key (known here: requests, maxLatency, stream, compare)"),
    ("fitness stream not a boolean", _edit("  requestTimeout: 10s\n",
                                           "  requestTimeout: 10s\n  fitness: {stream: sometimes}\n"),
     "verify.fitness.stream", "true or false, found 'sometimes'"),
    ("fitness not a mapping", _edit("  requestTimeout: 10s\n", "  requestTimeout: 10s\n  fitness: [requests]\n"),
     "verify.fitness", "a mapping, found"),
    ("empty selector", _edit("""    selector:
      app.kubernetes.io/name: llm-reasoning-candle
      component: predictor
""", "    selector: {}\n"), "backends.candle.selector", "non-empty mapping of label keys to values, found {}"),
    ("target is no backend", _edit("target: candle", "target: sglang"), "target",
     "the name of a backend (vllm, candle), found 'sglang'"),
    ("equal selectors", _edit("app.kubernetes.io/name: llm-reasoning-candle\n      component: predictor",
                              "app.kubernetes.io/name: llm-reasoning\n      component: predictor\n"
                              "      serving.kserve.io/inferenceservice: reasoning"),
     "backends.candle.selector", "different from backend 'vllm'"),
    ("no served names", _edit("servedNames: [reasoning-long, reasoning]", "servedNames: []"),
     "verify.servedNames", "non-empty list of the model names clients send, found [] (an empty list)"),
    ("plain http git url", _edit("url: https://github.com/acme/gitops.git", "url: http://git.local/acme/gitops.git"),
     "git.url", "plain http:// only with git.allowInsecure: true"),
    ("absolute path", _edit("path: k8s/apps", "path: /k8s/apps"), "git.path", "relative to the repository root"),
    ("dot-dot in path", _edit("path: k8s/apps", "path: k8s/../../etc"), "git.path", "without '..'"),
    ("bad duration", _edit("maxWait: 30m", "maxWait: 30 minutes"), "verify.maxWait",
     "a duration string like '90s', '30m', '1h', '1h30m' or '500ms', found '30 minutes' (a string)"),
    ("duration as a number", _edit("maxWait: 30m", "maxWait: 1800"), "verify.maxWait", "found 1800 (an integer)"),
    ("port as a string", _edit("    engine: candle-vllm\n    port: 8080", "    engine: candle-vllm\n    port: http"),
     "backends.candle.port", "an integer from 1 to 65535, found 'http' (a string)"),
    ("port out of range", _edit("    engine: vllm\n    port: 8080", "    engine: vllm\n    port: 70000"),
     "backends.vllm.port", "an integer from 1 to 65535, found 70000"),
    ("unknown engine", _edit("engine: candle-vllm", "engine: candle"), "backends.candle.engine",
     "one of vllm, candle-vllm, sglang, llama.cpp, tgi, openai"),
    ("label value read as a boolean", _edit("component: predictor\n    engine: candle-vllm",
                                           "component: true\n    engine: candle-vllm"),
     "backends.candle.selector.component", "(quote values such as true, 1.0 or on), found true (a boolean)"),
    ("invalid label value", _edit("component: predictor\n    engine: candle-vllm",
                                  "component: 'pre dictor'\n    engine: candle-vllm"),
     "backends.candle.selector.component", "valid Kubernetes label syntax"),
    ("missing required field", _edit("target: candle\n", ""), "target", "a value (this field is required)"),
    ("wrong apiVersion", _edit("apiVersion: cutover/v1alpha1", "apiVersion: cutover/v1"), "apiVersion",
     "'cutover/v1alpha1', found 'cutover/v1'"),
    ("wrong kind", _edit("kind: CutoverPlan", "kind: Plan"), "kind", "'CutoverPlan'"),
    ("unknown proof", _edit("proof: auto", "proof: maybe"), "verify.proof", "one of listed, generate, auto"),
    ("minReadyPods zero", _edit("minReadyPods: 1", "minReadyPods: 0"), "verify.minReadyPods", "from 1 to 10000"),
    ("credentials in the url", _edit("url: https://github.com/acme/gitops.git",
                                     "url: https://bot:hunter2hunter2@github.com/acme/gitops.git"),
     "git.url", "a URL without credentials"),
    ("a long token in the url", _edit("url: https://github.com/acme/gitops.git",
                                      "url: https://x-access-token:ghp_" + "L" * 36 + "@github.com/acme/gitops.git"),
     "git.url", "found 'https://github.com/...' (a URL with credentials in it, not shown)"),
    ("a token in the api url", _edit("apiUrl: null", "apiUrl: https://bot:" + "S" * 40 + "@ghe.example/api/v3"),
     "git.apiUrl", "found 'https://ghe.example/...' (a URL with credentials in it, not shown)"),
    ("one backend only", _edit("""  candle:
    selector:
      app.kubernetes.io/name: llm-reasoning-candle
      component: predictor
    engine: candle-vllm
    port: 8080
""", ""), "backends", "at least two backends"),
    ("a scalar where a mapping belongs", _edit("rollback:\n  auto: true", "rollback: yes-please"), "rollback",
     "a mapping, found 'yes-please'"),
    ("bot token without channel", _edit("webhookFile: /var/run/secrets/cutover/slack/webhook",
                                        "botTokenFile: /var/run/secrets/cutover/slack/token"),
     "notify.slack.channel", "a channel id (required with botTokenFile)"),
    ("not a namespace name", _edit("namespace: llm-serving", "namespace: LLM_Serving"), "service.namespace",
     "a DNS label"),
    # the name becomes branch names and hosting URLs' path segments: `x/../../main` once reached DELETE
    # /branches/main on the Gitea double (issue: plan names reach hosting URLs unescaped)
    ("a plan name that climbs out of its branch", _edit("  name: reasoning-long\n", "  name: x/../../main\n"),
     "metadata.name", "a DNS label"),
    ("a branch that climbs out of its ref", _edit("  branch: main\n", "  branch: x/../../main\n"),
     "git.branch", "a branch name"),
    ("a branch with a space", _edit("  branch: main\n", "  branch: my branch\n"), "git.branch",
     "no spaces"),
    # credentials are read from the Secrets' mount only, and sent to git.url's host only (docs/plan.md,
    # docs/security.md): this plan once sent the pod's own ServiceAccount token to a collector as a Bearer header
    ("the pod's ServiceAccount token as the Git token",
     _edit("cutover/git/token\n", "kubernetes.io/serviceaccount/token\n"),
     "git.tokenFile", "a file under /var/run/secrets/cutover/"),
    ("a token file that climbs out of the Secrets' mount",
     _edit("cutover/git/token\n", "cutover/../../../etc/shadow\n"),
     "git.tokenFile", "a file under /var/run/secrets/cutover/"),
    ("a relative Slack webhook file", _edit("webhookFile: /var/run/secrets/cutover/slack/webhook",
                                             "webhookFile: webhook"), "notify.slack.webhookFile", "a file under"),
    ("the Git token sent to another host", _edit("  apiUrl: null\n", "  apiUrl: "
                                                 "https://collector.example/api/v3\n"),
     "git.apiUrl", "a URL on git.url's host github.com (or on a host git.apiHosts lists"),
    ("apiHosts not a list", _edit("  branch: main\n", "  branch: main\n  apiHosts: api.example\n"), "git.apiHosts",
     "a list of host names"),
    ("duplicate served name", _edit("servedNames: [reasoning-long, reasoning]",
                                    "servedNames: [reasoning, reasoning]"), "verify.servedNames", "each name once"),
    ("refresh not a boolean", _edit("refresh: true", "refresh: sometimes"), "argocd.refresh", "true or false"),
    ("unknown git.source", _edit("  mode: direct\n", "  mode: direct\n  source: jsonnet\n"), "git.source",
     "one of manifest, kustomize, helm-values"),
    ("render.path absolute", _edit("  mode: direct\n", "  mode: direct\n  render: {path: /overlays/prod}\n"),
     "git.render.path", "relative to the repository root"),
    ("render.path with ..", _edit("  mode: direct\n", "  mode: direct\n  render: {path: ../other}\n"),
     "git.render.path", "without '..'"),
    ("render without a path", _edit("  mode: direct\n", "  mode: direct\n  render: {dir: x}\n"), "git.render.dir",
     "no such key"),
    ("gitValue outside helm-values", _edit("    engine: vllm\n", "    engine: vllm\n    gitValue: vllm\n"),
     "backends.vllm.gitValue", "no gitValue (it is for git.source helm-values only)"),
    ("gitValue on one backend only", _edit("  mode: direct\n", "  mode: direct\n  source: helm-values\n").replace(
        "    engine: vllm\n", "    engine: vllm\n    gitValue: vllm\n"), "backends.candle.gitValue",
     "a gitValue on every backend, or on none"),
    ("argocd.server plain http", _edit("  refresh: true\n", "  refresh: true\n  server: http://argocd.local\n"),
     "argocd.server", "an https:// URL"),
]


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
    example = Path(__file__).parents[1] / "manifests" / "examples" / "llm-serving" / "workload" / "plan-configmap.yaml"
    (one,) = plan.parse(example.read_text(), source="plan-configmap.yaml")
    assert one.name == "reasoning-long" and one.target in one.backends
    broken = example.read_text().replace("    target: candle", "    targett: candle", 1)
    with pytest.raises(InvalidInput, match=r"^plan-configmap.yaml \(data.plan.yaml\): targett: expected"):
        plan.parse(broken, source="plan-configmap.yaml")


def test_the_plans_names_are_the_registries_rows() -> None:
    """The plan owns the vocabulary, the wings its classes: a name without a class (or the reverse) is caught here."""
    from cutover import githost, sources

    assert tuple(githost.PROVIDERS) == plan.PROVIDERS
    assert tuple(sources.SOURCES) == plan.SOURCES
    assert set(plan.PUBLIC_HOSTS.values()) <= set(plan.PROVIDERS)
    assert [name for name, kind in sources.SOURCES.items() if kind.renders_itself] == ["kustomize"]
