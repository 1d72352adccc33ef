"""Plans for tests: a good one (`GOOD`), and bad ones (`BAD`: what is wrong, the edited plan, the field path and
the words the message must hold), shared by the plan's tests and the command line's bad-input tests."""

from __future__ import annotations

import textwrap

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


def edit(old: str, new: str) -> str:
    assert old in GOOD, old
    return GOOD.replace(old, new, 1)


# (what is wrong, the edited plan, the field path, words that must be in the message)
# a third backend, for handoff.strategy bridge (docs/capacity.md)
THREE = edit("target: candle\n", "  coder:\n    selector: {app: coder}\n    engine: vllm\n    port: 8000\n"
                                  "target: candle\n")

# docs/fleet.md: a fleet's cluster, where the fleet's commit chooses the backend and cutover writes nothing
FLEET = "mode: fleet\n" + edit("target: candle\n", "").replace("rollback:\n  auto: true\n", "")

BAD = [
    ("unknown top-level key", GOOD + "extra: 1\n", "extra", "no such key"),
    ("an unknown mode", "mode: many\n" + GOOD, "mode", "one of single, fleet, found 'many'"),
    ("a fleet's plan naming a target", "mode: fleet\n" + GOOD.replace("rollback:\n  auto: true\n", ""), "target",
     "no target under mode: fleet (the fleet's commit chooses the backend"),
    ("a fleet's plan rolling back by itself", FLEET + "rollback: {auto: true}\n", "rollback.auto",
     "false or absent under mode: fleet (the rollback is the revert of the fleet's commit"),
    ("a fleet's plan with a bridge", "mode: fleet\n" + THREE.replace("target: candle\n", "").replace(
        "rollback:\n  auto: true\n", "") + "handoff: {strategy: bridge, bridge: coder}\n", "handoff.strategy",
     "parallel or recreate under mode: fleet (a bridge's hops are commits cutover makes"),
    ("a fleet's plan retiring", FLEET + "handoff: {retire: {after: 1h}}\n", "handoff.retire",
     "no retire under mode: fleet (retiring the engine left is a commit"),
    ("a fleet's recreate without workloads", FLEET + "handoff: {strategy: recreate, maxGap: 30m}\n",
     "backends.vllm.workload", "the workload that holds the backend's resources"),
    ("unknown nested key", edit("  minReadyPods: 1\n", "  minReadyPods: 1\n  maxWiat: 5m\n"),
     "verify.maxWiat", "no such key (known here: servedNames, proof, minReadyPods, maxWait, requestTimeout, "
                       "fitness)"),
    # verify.fitness (docs/fitness.md)
    ("fitness requests below 1", edit("  requestTimeout: 10s\n", "  requestTimeout: 10s\n  fitness: {requests: 0}\n"),
     "verify.fitness.requests", "an integer from 1 to 20, found 0"),
    ("fitness requests above 20", edit("  requestTimeout: 10s\n",
                                        "  requestTimeout: 10s\n  fitness: {requests: 21}\n"),
     "verify.fitness.requests", "an integer from 1 to 20, found 21"),
    ("fitness maxLatency not a duration", edit("  requestTimeout: 10s\n",
                                                "  requestTimeout: 10s\n  fitness: {maxLatency: fast}\n"),
     "verify.fitness.maxLatency", "a duration string like '90s', '30m', '1h', '1h30m' or '500ms', found 'fast'"),
    ("fitness maxLatency zero", edit("  requestTimeout: 10s\n",
                                      "  requestTimeout: 10s\n  fitness: {maxLatency: 0s}\n"),
     "verify.fitness.maxLatency", "a duration above zero, found '0s'"),
    ("fitness maxLatency a number", edit("  requestTimeout: 10s\n",
                                          "  requestTimeout: 10s\n  fitness: {maxLatency: 5}\n"),
     "verify.fitness.maxLatency", "found 5 (an integer)"),
    ("fitness unknown key", edit("  requestTimeout: 10s\n",
                                  "  requestTimeout: 10s\n  fitness: {stream: true, p99: 2s}\n"),
     "verify.fitness.p99", "no such key (known here: requests, maxLatency, stream, compare)"),
    ("fitness stream not a boolean", edit("  requestTimeout: 10s\n",
                                           "  requestTimeout: 10s\n  fitness: {stream: sometimes}\n"),
     "verify.fitness.stream", "true or false, found 'sometimes'"),
    ("fitness not a mapping", edit("  requestTimeout: 10s\n", "  requestTimeout: 10s\n  fitness: [requests]\n"),
     "verify.fitness", "a mapping, found"),
    ("empty selector", edit("""    selector:
      app.kubernetes.io/name: llm-reasoning-candle
      component: predictor
""", "    selector: {}\n"), "backends.candle.selector", "non-empty mapping of label keys to values, found {}"),
    ("target is no backend", edit("target: candle", "target: sglang"), "target",
     "the name of a backend (vllm, candle), found 'sglang'"),
    ("equal selectors", edit("app.kubernetes.io/name: llm-reasoning-candle\n      component: predictor",
                              "app.kubernetes.io/name: llm-reasoning\n      component: predictor\n"
                              "      serving.kserve.io/inferenceservice: reasoning"),
     "backends.candle.selector", "different from backend 'vllm'"),
    ("a selector within another's", edit("app.kubernetes.io/name: llm-reasoning-candle\n      component: predictor",
                                         "app.kubernetes.io/name: llm-reasoning\n      component: predictor"),
     "backends.candle.selector", "not part of another backend's"),
    ("no served names", edit("servedNames: [reasoning-long, reasoning]", "servedNames: []"),
     "verify.servedNames", "non-empty list of the model names clients send, found [] (an empty list)"),
    ("plain http git url", edit("url: https://github.com/acme/gitops.git", "url: http://git.local/acme/gitops.git"),
     "git.url", "plain http:// only with git.allowInsecure: true"),
    ("absolute path", edit("path: k8s/apps", "path: /k8s/apps"), "git.path", "relative to the repository root"),
    ("dot-dot in path", edit("path: k8s/apps", "path: k8s/../../etc"), "git.path", "without '..'"),
    ("bad duration", edit("maxWait: 30m", "maxWait: 30 minutes"), "verify.maxWait",
     "a duration string like '90s', '30m', '1h', '1h30m' or '500ms', found '30 minutes' (a string)"),
    ("duration as a number", edit("maxWait: 30m", "maxWait: 1800"), "verify.maxWait", "found 1800 (an integer)"),
    ("port as a string", edit("    engine: candle-vllm\n    port: 8080", "    engine: candle-vllm\n    port: http"),
     "backends.candle.port", "an integer from 1 to 65535, found 'http' (a string)"),
    ("port out of range", edit("    engine: vllm\n    port: 8080", "    engine: vllm\n    port: 70000"),
     "backends.vllm.port", "an integer from 1 to 65535, found 70000"),
    ("unknown engine", edit("engine: candle-vllm", "engine: candle"), "backends.candle.engine",
     "one of vllm, candle-vllm, sglang, llama.cpp, tgi, openai"),
    ("label value read as a boolean", edit("component: predictor\n    engine: candle-vllm",
                                           "component: true\n    engine: candle-vllm"),
     "backends.candle.selector.component", "(quote values such as true, 1.0 or on), found true (a boolean)"),
    ("invalid label value", edit("component: predictor\n    engine: candle-vllm",
                                  "component: 'pre dictor'\n    engine: candle-vllm"),
     "backends.candle.selector.component", "valid Kubernetes label syntax"),
    ("missing required field", edit("target: candle\n", ""), "target", "a value (this field is required)"),
    ("wrong apiVersion", edit("apiVersion: cutover/v1alpha1", "apiVersion: cutover/v1"), "apiVersion",
     "'cutover/v1alpha1', found 'cutover/v1'"),
    # names that reach request paths and branch names (docs/plan.md)
    ("backend name not a DNS label", edit("  candle:\n", "  \"candle/../../main#\":\n").replace(
        "target: candle", "target: \"candle/../../main#\""), "backends.candle/../../main#",
     "a DNS label (lowercase alphanumerics and '-', at most 63), found 'candle/../../main#'"),
    ("argocd application with a slash", edit("application: llm-serving", "application: ../x"), "argocd.application",
     "a Kubernetes object name"),
    ("argocd namespace not a DNS label", edit("  namespace: argocd\n", "  namespace: Argo_CD\n"),
     "argocd.namespace", "a DNS label"),
    ("model empty", edit("    engine: vllm\n", "    engine: vllm\n    model: ''\n"),
     "backends.vllm.model", "a non-empty string"),
    # backends.<name>.workload (docs/capacity.md)
    ("workload of an unknown kind", edit("    engine: vllm\n",
                                         "    engine: vllm\n    workload: {kind: Pod, name: v}\n"),
     "backends.vllm.workload.kind", "one of Deployment, StatefulSet, InferenceService, found 'Pod'"),
    ("workload name not an object name", edit("    engine: vllm\n",
                                              "    engine: vllm\n    workload: {kind: Deployment, name: V_1}\n"),
     "backends.vllm.workload.name", "a Kubernetes object name"),
    ("workload path with ..", edit("    engine: vllm\n", "    engine: vllm\n    workload: {kind: Deployment, name: v, "
                                                        "path: ../../etc/x.yaml}\n"),
     "backends.vllm.workload.path", "without '..'"),
    ("valuesKey without its file", edit("    engine: vllm\n", "    engine: vllm\n    workload: {kind: Deployment, "
                                                             "name: v, valuesKey: engine.replicas}\n"),
     "backends.vllm.workload.path", "the values file that holds valuesKey"),
    ("valuesKey that is no replica count",
     edit("    engine: vllm\n", "    engine: vllm\n    workload: {kind: Deployment, name: v, path: values.yaml, "
                               "valuesKey: engine.securityContext.runAsUser}\n"),
     "backends.vllm.workload.valuesKey", "a replica count's key, ending in replicas or replicaCount"),
    ("valuesKey on an InferenceService", edit("    engine: vllm\n", "    engine: vllm\n    workload: {kind: "
                                                                   "InferenceService, name: v, valuesKey: a, path: "
                                                                   "v.yaml}\n"),
     "backends.vllm.workload.valuesKey", "no valuesKey (an InferenceService is stopped by its annotation"),
    ("workload unknown key", edit("    engine: vllm\n", "    engine: vllm\n    workload: {kind: Deployment, name: v, "
                                                        "replicas: 0}\n"),
     "backends.vllm.workload.replicas", "no such key (known here: kind, name, path, valuesKey)"),
    # handoff (docs/capacity.md)
    ("unknown strategy", GOOD + "handoff: {strategy: blue-green}\n", "handoff.strategy",
     "one of parallel, bridge, recreate, found 'blue-green'"),
    ("bridge without a bridge", GOOD + "handoff: {strategy: bridge}\n", "handoff.bridge",
     "the backend that serves the names while the source is freed"),
    ("bridge is the target", GOOD + "handoff: {strategy: bridge, bridge: candle}\n", "handoff.bridge",
     "a backend of the plan other than the target (vllm), found 'candle'"),
    ("bridge between two backends", GOOD + "handoff: {strategy: bridge, bridge: vllm}\n", "handoff.bridge",
     "a third backend besides the target and the one it replaces (the plan has vllm, candle), found 'vllm'"),
    ("bridge names not served", THREE + "handoff: {strategy: bridge, bridge: coder, bridgeNames: [chat]}\n",
     "handoff.bridgeNames[0]", "one of verify.servedNames (reasoning-long, reasoning), found 'chat'"),
    ("recreate without consent", GOOD + "handoff: {strategy: recreate}\n", "handoff.maxGap",
     "maxGap is the consent to it"),
    ("recreate without workloads", GOOD + "handoff: {strategy: recreate, maxGap: 45m}\n", "backends.vllm.workload",
     "the workload that holds the backend's resources"),
    ("maxGap outside recreate", GOOD + "handoff: {maxGap: 45m}\n", "handoff.maxGap",
     "no maxGap (it is for handoff.strategy: recreate, and bridge with names the bridge does not answer)"),
    ("bridge leaving names dark without consent",
     THREE + "handoff: {strategy: bridge, bridge: coder, bridgeNames: [reasoning]}\n", "handoff.maxGap",
     "handoff.bridgeNames leaves reasoning-long unanswered while the bridge serves, and maxGap is the consent"),
    ("maxGap on a bridge that answers every name", THREE + "handoff: {strategy: bridge, bridge: coder, maxGap: 45m}\n",
     "handoff.maxGap", "handoff.bridgeNames holds every served name: no name goes unanswered"),
    ("drainTimeout not a duration", GOOD + "handoff: {drainTimeout: soon}\n", "handoff.drainTimeout",
     "a duration string like"),
    ("retire without after", GOOD + "handoff: {retire: {}}\n", "handoff.retire.after",
     "a value (this field is required)"),
    ("unknown handoff key", GOOD + "handoff: {strategy: parallel, surge: 1}\n", "handoff.surge",
     "no such key (known here: strategy, bridge, bridgeNames, maxGap, drainTimeout, retire)"),
    ("wrong kind", edit("kind: CutoverPlan", "kind: Plan"), "kind", "'CutoverPlan'"),
    ("unknown proof", edit("proof: auto", "proof: maybe"), "verify.proof", "one of listed, generate, auto"),
    ("minReadyPods zero", edit("minReadyPods: 1", "minReadyPods: 0"), "verify.minReadyPods", "from 1 to 10000"),
    ("credentials in the url", edit("url: https://github.com/acme/gitops.git",
                                     "url: https://bot:hunter2hunter2@github.com/acme/gitops.git"),
     "git.url", "a URL without credentials"),
    ("a long token in the url", edit("url: https://github.com/acme/gitops.git",
                                      "url: https://x-access-token:ghp_" + "L" * 36 + "@github.com/acme/gitops.git"),
     "git.url", "found 'https://github.com/...' (a URL with credentials in it, not shown)"),
    ("a token in the api url", edit("apiUrl: null", "apiUrl: https://bot:" + "S" * 40 + "@ghe.example/api/v3"),
     "git.apiUrl", "found 'https://ghe.example/...' (a URL with credentials in it, not shown)"),
    ("one backend only", edit("""  candle:
    selector:
      app.kubernetes.io/name: llm-reasoning-candle
      component: predictor
    engine: candle-vllm
    port: 8080
""", ""), "backends", "at least two backends"),
    ("a scalar where a mapping belongs", edit("rollback:\n  auto: true", "rollback: yes-please"), "rollback",
     "a mapping, found 'yes-please'"),
    ("bot token without channel", edit("webhookFile: /var/run/secrets/cutover/slack/webhook",
                                        "botTokenFile: /var/run/secrets/cutover/slack/token"),
     "notify.slack.channel", "a channel id (required with botTokenFile)"),
    ("not a namespace name", edit("namespace: llm-serving", "namespace: LLM_Serving"), "service.namespace",
     "a DNS label"),
    # the name becomes branch names and hosting URLs' path segments: `x/../../main` once reached DELETE
    # /branches/main on the Gitea double (issue: plan names reach hosting URLs unescaped)
    ("a plan name that climbs out of its branch", edit("  name: reasoning-long\n", "  name: x/../../main\n"),
     "metadata.name", "a DNS label"),
    ("a branch that climbs out of its ref", edit("  branch: main\n", "  branch: x/../../main\n"),
     "git.branch", "a branch name"),
    ("a branch with a space", edit("  branch: main\n", "  branch: my branch\n"), "git.branch",
     "no spaces"),
    # credentials are read from the Secrets' mount only, and sent to git.url's host only (docs/plan.md,
    # docs/security.md): this plan once sent the pod's own ServiceAccount token to a collector as a Bearer header
    ("the pod's ServiceAccount token as the Git token",
     edit("cutover/git/token\n", "kubernetes.io/serviceaccount/token\n"),
     "git.tokenFile", "a file under /var/run/secrets/cutover/"),
    ("a token file that climbs out of the Secrets' mount",
     edit("cutover/git/token\n", "cutover/../../../etc/shadow\n"),
     "git.tokenFile", "a file under /var/run/secrets/cutover/"),
    ("a relative Slack webhook file", edit("webhookFile: /var/run/secrets/cutover/slack/webhook",
                                             "webhookFile: webhook"), "notify.slack.webhookFile", "a file under"),
    ("the Git token sent to another host", edit("  apiUrl: null\n", "  apiUrl: "
                                                 "https://collector.example/api/v3\n"),
     "git.apiUrl", "a URL on git.url's host github.com (or on a host git.apiHosts lists"),
    ("apiHosts not a list", edit("  branch: main\n", "  branch: main\n  apiHosts: api.example\n"), "git.apiHosts",
     "a list of host names"),
    ("duplicate served name", edit("servedNames: [reasoning-long, reasoning]",
                                    "servedNames: [reasoning, reasoning]"), "verify.servedNames", "each name once"),
    ("refresh not a boolean", edit("refresh: true", "refresh: sometimes"), "argocd.refresh", "true, false or always"),
    ("unknown git.source", edit("  mode: direct\n", "  mode: direct\n  source: jsonnet\n"), "git.source",
     "one of manifest, kustomize, helm-values"),
    ("render.path absolute", edit("  mode: direct\n", "  mode: direct\n  render: {path: /overlays/prod}\n"),
     "git.render.path", "relative to the repository root"),
    ("render.path with ..", edit("  mode: direct\n", "  mode: direct\n  render: {path: ../other}\n"),
     "git.render.path", "without '..'"),
    ("render without a path", edit("  mode: direct\n", "  mode: direct\n  render: {dir: x}\n"), "git.render.dir",
     "no such key"),
    ("gitValue outside helm-values", edit("    engine: vllm\n", "    engine: vllm\n    gitValue: vllm\n"),
     "backends.vllm.gitValue", "no gitValue (it is for git.source helm-values only)"),
    ("gitValue on one backend only", edit("  mode: direct\n", "  mode: direct\n  source: helm-values\n").replace(
        "    engine: vllm\n", "    engine: vllm\n    gitValue: vllm\n"), "backends.candle.gitValue",
     "a gitValue on every backend, or on none"),
    ("argocd.server plain http", edit("  refresh: true\n", "  refresh: true\n  server: http://argocd.local\n"),
     "argocd.server", "an https:// URL"),
]
