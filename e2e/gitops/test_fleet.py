"""A fleet through the real applicationset-controller (docs/fleet.md, issue 55): three rings as namespaces of the
tier's cluster, one ApplicationSet stepping them one at a time (RollingSync), one commit switching every ring's
Service. Each ring's sync is gated by cutover's PreSync (the backend the commit selects, proven on that ring's pods)
and verified by `cutover verify --synced` in the Sync phase, before the mark of a verified switch: the first two rings
switch in step order, the third's target answers 503, its gate refuses, its Service keeps its selector and its step
stalls; `cutover status --fleet` says so; the revert goes back ring by ring.

CI runs it in the handoff shard (.ci/run sets CUTOVER_FLEET_TIER=1); alone: CUTOVER_FLEET_TIER=1 make e2e
TIER=gitops SCENARIOS=e2e/gitops/test_fleet.py. Without the variable (a `make e2e` of the whole tier by hand) it is
skipped: it adds three rings' syncs to a run that did not ask for them."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import kubernetes
import pytest

from conftest import MEASURED
from tier import githost, gitops
from tier.engines import EnginePods

pytestmark = pytest.mark.skipif(os.environ.get("CUTOVER_FLEET_TIER") != "1",
                                reason="the fleet's tier runs outside CI: CUTOVER_FLEET_TIER=1")

FIXTURES = gitops.cluster.ROOT / "e2e" / "fixtures" / "fleet"
RINGS = ("fleet-a", "fleet-b", "fleet-c")
SHARED = "e2e/fixtures/fleet/shared/service/service.yaml"
VLLM = {"app.kubernetes.io/name": "fleet-vllm", "component": "predictor"}
CANDLE = {"app.kubernetes.io/name": "fleet-candle", "component": "predictor"}


def ring_files(ring: str) -> dict[str, str]:
    """A ring's Application path: the shared Service as it is, the shared engines and the fleet's hooks on the
    tier's timeline under the ring's suffix, the ring's plan (its namespace; no target, no Application: found in
    the hook's tracking), and the mark's labels written from the Service's selector."""
    head = "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\n"
    kustomization = head + f"""resources: [../shared/service, engines, hooks]
replacements:
  - source: {{kind: Service, name: chat, fieldPath: spec.selector}}
    targets:
      - select: {{kind: ConfigMap, name: cutover-verified-{ring}}}
        fieldPaths: [metadata.labels]
        options: {{create: true}}
"""
    engines = head + f"nameSuffix: -{ring}\nresources: [../../shared/engines]\ncomponents: [../../../timeline]\n"
    hooks = head + f"""nameSuffix: -{ring}
components: [../../../../../fleet, ../../../timeline]
configMapGenerator:
  - {{name: cutover-plan, namespace: cutover, files: [plan.yaml], options: {{disableNameSuffixHash: true}}}}
"""
    plan = f"""apiVersion: cutover/v1alpha1
kind: CutoverPlan
mode: fleet
metadata: {{name: chat-{ring}}}
service: {{namespace: {ring}, name: chat, ports: [80]}}
backends:
  vllm: {{selector: {json.dumps(VLLM)}, engine: vllm, port: 8080}}
  candle: {{selector: {json.dumps(CANDLE)}, engine: candle-vllm, port: 8080}}
verify: {{servedNames: [chat], maxWait: 60s, requestTimeout: 5s}}
git:
  provider: github
  url: {githost.REPO_URL}
  apiUrl: https://{githost.ADDRESS[0]}:{githost.ADDRESS[1]}
  caFile: /var/run/secrets/cutover/git/ca.crt
  branch: main
  path: {SHARED}
  document: {{kind: Service, name: chat}}
  tokenFile: /var/run/secrets/cutover/git/token
argocd: {{namespace: argocd}}
"""
    return {f"e2e/fixtures/fleet/{ring}/kustomization.yaml": kustomization,
            f"e2e/fixtures/fleet/{ring}/engines/kustomization.yaml": engines,
            f"e2e/fixtures/fleet/{ring}/hooks/kustomization.yaml": hooks,
            f"e2e/fixtures/fleet/{ring}/hooks/plan.yaml": plan}


def workload_roles(argo: gitops.GitOpsTier, ring: str) -> None:
    """The administrator's part for a ring (docs/install.md, step 2): its namespace, and cutover's Roles in it as
    manifests/workload renders them (the replacements `cutover init` writes)."""
    from cutover.cli import scaffold

    argo.kubectl("create", "namespace", ring)
    directory = argo.dir / f"workload-{ring}"
    directory.mkdir()
    (directory / "workload.yaml").write_text(f"""apiVersion: cutover.dev/v1alpha1
kind: Workload
metadata:
  name: cutover-workload
  annotations: {{config.kubernetes.io/local-config: "true"}}
spec: {{namespace: {ring}, service: chat, port: 8080, cutoverNamespace: cutover}}
""")
    (directory / "kustomization.yaml").write_text(
        "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources: [workload.yaml]\n"
        f"components: [{os.path.relpath(gitops.cluster.ROOT / 'manifests' / 'workload', directory)}]\n"
        + scaffold.WORKLOAD_REPLACEMENTS)
    built = argo.kubectl("kustomize", str(directory)).stdout
    # the Roles beside the ring's Service; not the egress NetworkPolicy, which is named per credentials namespace
    # (one workload's each in production) and here would replace llm-serving's in `cutover`
    kept = [doc for doc in built.split("\n---\n") if "kind: NetworkPolicy" not in doc]
    (directory / "roles.yaml").write_text("\n---\n".join(kept))
    argo.kubectl("apply", "-f", str(directory / "roles.yaml"))
    argo.grant_refresh(ring, verbs="get")  # its hooks read their Application (the revision being synced)


def selector_of(argo: gitops.GitOpsTier, ring: str) -> dict[str, str]:
    return dict(argo.core.read_namespaced_service("chat", ring).spec.selector or {})


def healthy_and_synced(argo: gitops.GitOpsTier, ring: str, revision: str) -> bool:
    try:
        status = argo.app(ring).get("status", {})
    except kubernetes.client.ApiException as exc:  # the applicationset-controller has yet to make it
        if exc.status == 404:
            return False
        raise
    return (status.get("sync", {}).get("status"), status.get("sync", {}).get("revision"),
            status.get("health", {}).get("status")) == ("Synced", revision, "Healthy")


@pytest.fixture(scope="module")
def engines(argo: gitops.GitOpsTier) -> Iterator[dict[str, EnginePods]]:
    """An engine double behind every engine pod of each ring (the tier's own watch keeps llm-serving's)."""
    found = {ring: EnginePods(kubernetes.config.new_client_from_config(str(argo.plane.kubeconfig)), ring)
             for ring in RINGS}
    for pods in found.values():
        pods.start()
    yield found
    for pods in found.values():
        pods.stop()


@pytest.fixture(scope="module")
def fleet(argo: gitops.GitOpsTier, engines: dict[str, EnginePods]) -> Iterator[str]:
    """The rings installed and rolled out once (each first sync gated, applied and verified, step by step); the
    revision they run."""
    for ring in RINGS:
        workload_roles(argo, ring)
    # the gates read the step order (docs/fleet.md): the ApplicationSet, beside each ring's Application (above)
    for made in (["role", "cutover-fleet", "--verb=get", "--resource=applicationsets.argoproj.io",
                  "--resource-name=fleet"],
                 ["rolebinding", "cutover-fleet", "--role=cutover-fleet", "--serviceaccount=cutover:cutover"]):
        argo.kubectl("-n", "argocd", "create", *made)
    files = {name: text for ring in RINGS for name, text in ring_files(ring).items()}
    seed = argo.git.repo.commit(files, "Three rings of chat, one ApplicationSet\n")
    for name in ("project.yaml", "applicationset.yaml"):
        path = argo.dir / f"fleet-{name}"
        path.write_text(argo.users_copy((FIXTURES / name).read_text()))
        argo.kubectl("apply", "-f", str(path))
    for ring in RINGS:
        argo.wait(f"{ring} rolled out", lambda ring=ring: healthy_and_synced(argo, ring, seed), timeout=600)
    yield seed
    argo.kubectl("-n", "argocd", "delete", "applicationset", "fleet", "--wait=false", check=False)


def status_fleet(argo: gitops.GitOpsTier) -> dict[str, Any]:
    done = subprocess.run([sys.executable, "-m", "cutover", "status", "--fleet", "argocd/fleet", "--output", "json"],
                          capture_output=True, text=True, check=False,
                          env={"PATH": os.environ["PATH"], "KUBECONFIG": str(argo.plane.kubeconfig)})
    assert done.returncode == 0, done.stderr[-2000:]
    found: dict[str, Any] = json.loads(done.stdout)
    return found


# what `make bench` reads back (bench/run.py, row 20): the fleet's time against the sum of its steps' syncs
KEPT = gitops.cluster.ROOT / "build" / "tier-fleet.json"


def sync_span(argo: gitops.GitOpsTier, ring: str, revision: str) -> tuple[datetime, datetime]:
    """When the ring's sync of `revision` started and ended, from ArgoCD's own history of the Application (to the
    second): not its operation state, which the applicationset-controller may have moved on to another sync by then.
    The first sync of the revision: RollingSync syncs a ring of an earlier step again once a later step is done."""
    entry = min((entry for entry in argo.app(ring)["status"].get("history") or ()
                 if entry.get("revision") == revision), key=lambda entry: entry["deployStartedAt"])
    started, finished = (datetime.fromisoformat(entry[key].replace("Z", "+00:00")) for key in ("deployStartedAt",
                                                                                              "deployedAt"))
    return started, finished


def sync_seconds(argo: gitops.GitOpsTier, ring: str, revision: str) -> float:
    started, finished = sync_span(argo, ring, revision)
    return (finished - started).total_seconds()


def keep_fleet_timing(total: float, syncs: list[float]) -> None:
    """The fleet's total time (commit → the last step's cluster verified) against the sum of each step's sync (one
    cluster a step here, so each step's slowest): what RollingSync's stepping and ArgoCD's pickup add."""
    KEPT.parent.mkdir(exist_ok=True)
    KEPT.write_text(json.dumps({"at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "total": total,
                                "syncs": syncs}, indent=2) + "\n")


def test_one_commit_switches_the_rings_in_step_order_and_stalls_where_the_gate_refuses(
        argo: gitops.GitOpsTier, fleet: str, engines: dict[str, EnginePods]) -> None:
    assert all(selector_of(argo, ring) == VLLM for ring in RINGS)
    engines["fleet-c"].fault("fleet-candle-fleet-c", "503")  # the third ring's candle answers 503: its gate refuses
    try:
        text = (gitops.cluster.ROOT / SHARED).read_text().replace("name: fleet-vllm", "name: fleet-candle")
        started = datetime.now(UTC)
        commit = argo.git.repo.commit({SHARED: text}, "chat: candle-vllm in every ring\n")
        for ring in RINGS:
            argo.refresh(ring)  # the repository's webhook
        switched = first_seen(argo, "fleet-a and fleet-b switched", lambda ring: selector_of(argo, ring) == CANDLE)
        verified = first_seen(argo, "fleet-a and fleet-b verified and marked",
                              lambda ring: healthy_and_synced(argo, ring, commit))
        switched_at = {ring: (at - started).total_seconds() for ring, at in switched.items()}
        verified_at = (verified["fleet-b"] - started).total_seconds()  # the second step's cluster: two steps done
        syncs = [sync_seconds(argo, ring, commit) for ring in RINGS[:2]]
        spans = {ring: [f"{at:%T}" for at in sync_span(argo, ring, commit)] for ring in RINGS[:2]}
        MEASURED.append(f"the fleet's commit, each ring's first sync of it (start, end): {spans}")
        # the step's sync names no revision of its own (the Application's target): its result says which it synced
        third = argo.wait("the third ring's sync refused", lambda: (state := argo.app("fleet-c").get(
            "status", {}).get("operationState")) and state.get("phase") in ("Failed", "Error")
            and commit in (state.get("syncResult", {}).get("revision"),
                           state.get("operation", {}).get("sync", {}).get("revision")) and state, timeout=300)
        fleet_now = status_fleet(argo)
        assert switched["fleet-b"] >= sync_span(argo, "fleet-a", commit)[1], switched  # after fleet-a's whole sync
        assert selector_of(argo, "fleet-c") == VLLM  # never switched
        hooks = {r["name"]: r.get("hookPhase") for r in third["syncResult"]["resources"] if r.get("hookType")}
        assert hooks.get("cutover-presync-fleet-c") == "Failed" and "cutover-verify-fleet-c" not in hooks, hooks
        clusters = {cluster["application"]: cluster for cluster in fleet_now["clusters"]}
        assert clusters["fleet-a"]["sync"] == "Synced" and clusters["fleet-c"]["sync"] == "OutOfSync", clusters
        keep_fleet_timing(verified_at, syncs)
        MEASURED.append(f"a fleet's two steps: the commit to the second ring verified {verified_at:.1f} s, its rings' "
                        f"syncs {' + '.join(f'{one:.0f}' for one in syncs)} s (ArgoCD's seconds): "
                        f"{verified_at / sum(syncs):.2f}x the sum of the steps' syncs")
        MEASURED.append(f"a fleet of three rings (RollingSync): one commit switched fleet-a at "
                        f"{switched_at['fleet-a']:.1f} s and fleet-b at {switched_at['fleet-b']:.1f} s, each gated and "
                        f"verified; fleet-c's gate refused (its candle answered 503), its Service kept vLLM; status "
                        "--fleet: " + "; ".join(f"{name} {c['status']}/{c['sync']}" for name, c in clusters.items()))

        # the way back: the revert of the fleet's commit, ring by ring, each gate proving vLLM. fleet-c's candle
        # still refuses meanwhile: RollingSync tries a stalled step's sync again, and one that passed with the
        # revert already committed would be counted done for the revert it never synced (argo-cd#29410)
        revert_back(argo)
    finally:
        engines["fleet-c"].fault("fleet-candle-fleet-c", None)


def first_seen(argo: gitops.GitOpsTier, what: str, check: Any,
               rings: tuple[str, ...] = RINGS[:2]) -> dict[str, datetime]:
    """When each ring first met `check`, the rings looked at together every half second (one after the other would
    date a ring that got there first by when the wait for the other ended)."""
    seen: dict[str, datetime] = {}

    def all_seen() -> bool:
        for ring in rings:
            if ring not in seen and check(ring):
                seen[ring] = datetime.now(UTC)
        return len(seen) == len(rings)

    argo.wait(what, all_seen, timeout=600, every=0.5)
    return seen


def sync_started(argo: gitops.GitOpsTier, ring: str, since: datetime) -> bool:
    started = (argo.app(ring).get("status", {}).get("operationState") or {}).get("startedAt")
    return bool(started) and datetime.fromisoformat(started.replace("Z", "+00:00")) >= since


def revert_back(argo: gitops.GitOpsTier) -> None:
    """The revert, with RollingSync's slip forced (docs/fleet.md, "The order of the steps"): the later rings are
    refreshed first, so the applicationset-controller finds fleet-a still Healthy for the commit before and starts
    fleet-b beside it (argo-cd#29410, read in progressive_sync.go); fleet-a is refreshed once fleet-b's sync
    started. fleet-b's gate waits for fleet-a's sync of the revert: its Service goes back only after that ended."""
    since = datetime.now(UTC).replace(microsecond=0)
    log_since = time.time()
    revert = argo.git.repo.commit({SHARED: (gitops.cluster.ROOT / SHARED).read_text()}, "chat: back to vLLM\n")
    for ring in reversed(RINGS[1:]):
        argo.refresh(ring)
    # ArgoCD's own look may refresh fleet-a first: then RollingSync keeps the order itself, nothing slips
    with contextlib.suppress(AssertionError):
        argo.wait("fleet-b's sync of the revert started", lambda: sync_started(argo, "fleet-b", since), timeout=60,
                  every=0.5)
    argo.refresh("fleet-a")
    back = first_seen(argo, "fleet-a and fleet-b back on vLLM", lambda ring: selector_of(argo, ring) == VLLM)
    for ring in RINGS:
        argo.wait(f"{ring} synced the revert", lambda ring=ring: selector_of(argo, ring) == VLLM and
                  healthy_and_synced(argo, ring, revert), timeout=600)
    a_started, a_ended = sync_span(argo, "fleet-a", revert)
    b_started, _ = sync_span(argo, "fleet-b", revert)
    gate = "".join(argo.hook_logs(log_since, "cutover-presync-fleet-b").values())
    assert back["fleet-b"] >= a_ended, (back, a_started, a_ended)  # the step order, whatever RollingSync did
    slipped = b_started < a_ended
    if slipped:
        assert '"fleet.earlier_steps_waiting"' in gate and '"fleet.earlier_steps_done"' in gate, gate[-3000:]
    MEASURED.append(f"the revert with the later rings refreshed first: fleet-b's sync started {b_started:%T}, "
                    f"fleet-a's {a_started:%T}–{a_ended:%T}, fleet-b's Service back at {back['fleet-b']:%T}: "
                    + ("RollingSync started fleet-b early (argo-cd#29410) and its gate waited for fleet-a" if slipped
                       else "RollingSync kept the order itself this run (ArgoCD's own look refreshed fleet-a first)"))


# --- a full ring: `recreate` in two fleet commits (docs/fleet.md) -----------------------------------------------------

FULL_NODE = "kwok-gpu-fleet"  # one card, fleet-c's alone (a taint keeps every other pod off it)
FULL_ENGINES = "e2e/fixtures/fleet/fleet-c/engines/kustomization.yaml"
FULL_RING = "e2e/fixtures/fleet/fleet-c/kustomization.yaml"


def full_node(argo: gitops.GitOpsTier) -> None:
    taint = {"key": "e2e.cutover.dev/fleet", "value": "full", "effect": "NoSchedule"}
    argo.add_node(FULL_NODE, "10.250.0.12", 1, labels={"e2e.cutover.dev/fleet": "full"}, taints=(taint,))
    argo.wait(f"{FULL_NODE} Ready", lambda: argo.node_ready(FULL_NODE))


def full_ring(vllm: int, candle: int) -> dict[str, str]:
    """fleet-c on the full node: both engines take its one card (kustomize `replicas:` in the ring's path, the counts
    a fleet's commit changes), and its plan `handoff: recreate`, rendering the ring's path to see them."""
    ring = ring_files("fleet-c")
    engines = ring[FULL_ENGINES] + """patches:
  - target: {kind: Deployment}
    patch: |-
      - {op: add, path: /spec/template/spec/nodeSelector, value: {e2e.cutover.dev/fleet: full}}
      - {op: add, path: /spec/template/spec/tolerations, value: [{key: e2e.cutover.dev/fleet, operator: Exists}]}
      - {op: add, path: /spec/template/spec/containers/0/resources, value: {limits: {nvidia.com/gpu: 1}}}
"""
    kustomization = ring[FULL_RING] + f"""replicas:
  - {{name: fleet-vllm-fleet-c, count: {vllm}}}
  - {{name: fleet-candle-fleet-c, count: {candle}}}
"""
    plan_path = "e2e/fixtures/fleet/fleet-c/hooks/plan.yaml"
    plan = ring[plan_path]
    for backend, deployment in (("vllm", "fleet-vllm-fleet-c"), ("candle", "fleet-candle-fleet-c")):
        plan = plan.replace(f"  {backend}: {{selector: ",
                            f"  {backend}: {{workload: {{kind: Deployment, name: {deployment}, path: {FULL_RING}}}, "
                            "selector: ")
    plan = plan.replace("  document: {kind: Service, name: chat}\n", "  document: {kind: Service, name: chat}\n"
                        "  source: kustomize\n  render: {path: e2e/fixtures/fleet/fleet-c}\n")
    plan += "handoff: {strategy: recreate, maxGap: 5m}\n"
    assert plan.count("workload:") == 2 and "source: kustomize" in plan
    return {FULL_ENGINES: engines, FULL_RING: kustomization, plan_path: plan}


def ring_pods(argo: gitops.GitOpsTier, deployment: str) -> list[Any]:
    selector = {"fleet-vllm-fleet-c": VLLM, "fleet-candle-fleet-c": CANDLE}[deployment]
    return [pod for pod in argo.core.list_namespaced_pod(
        "fleet-c", label_selector=",".join(f"{k}={v}" for k, v in selector.items())).items
        if pod.metadata.deletion_timestamp is None]


def rolled_out(argo: gitops.GitOpsTier, revision: str) -> bool:
    """Every ring Healthy and Synced at `revision`, and fleet-c's sync of it ended (a swap leaves the mark as it is:
    the Application is Synced before its verifier has run)."""
    state = argo.app("fleet-c").get("status", {}).get("operationState") or {}
    ended = state.get("phase") == "Succeeded" and revision in ((state.get("syncResult") or {}).get("revision"),
                                                               state.get("operation", {}).get("sync", {}).get(
                                                                   "revision"))
    return ended and all(healthy_and_synced(argo, ring, revision) for ring in RINGS)


def test_a_full_ring_takes_recreate_in_two_fleet_commits_while_the_others_switch_in_parallel(
        argo: gitops.GitOpsTier, fleet: str, engines: dict[str, EnginePods]) -> None:
    """fleet-c on a node whose one card its vLLM holds (`handoff: recreate`), fleet-a and fleet-b with room
    (`parallel`). The fleet's first commit swaps fleet-c's engines (vLLM 0, candle 1, the selector as it is): its
    gate judges that candle fits once vLLM is gone, ArgoCD stops vLLM and starts candle, its verifier says the name
    is dark until the next commit (the step goes on); the other rings' syncs change nothing. The second commit
    switches every ring's Service: each gate proves candle, each verifier verifies, step by step. Nothing is
    committed by cutover."""
    assert all(selector_of(argo, ring) == VLLM for ring in RINGS)  # the first scenario's revert
    full_node(argo)
    authored = len(argo.git.cutover_commits())
    setup = argo.git.repo.commit(full_ring(vllm=1, candle=0), "fleet-c on its full node, handoff: recreate\n")
    for ring in RINGS:
        argo.refresh(ring)
    argo.wait("fleet-c on the full node, every ring synced", lambda: rolled_out(argo, setup) and [
        pod.spec.node_name for pod in ring_pods(argo, "fleet-vllm-fleet-c")] == [FULL_NODE], timeout=600)

    started, since = time.monotonic(), time.time()
    swap = argo.git.repo.commit({FULL_RING: full_ring(vllm=0, candle=1)[FULL_RING]},
                                "fleet: swap fleet-c's engines (recreate's first commit)\n")
    for ring in RINGS:
        argo.refresh(ring)
    argo.wait("the swap rolled out", lambda: rolled_out(argo, swap), timeout=600, every=0.5)
    swapped = time.monotonic() - started
    # what fleet-c's hooks said of the swap: the gate judged the swap and let it go on, the verifier said dark
    gate = "".join(argo.hook_logs(since, "cutover-presync-fleet-c").values())
    dark = "".join(argo.hook_logs(since, "cutover-verify-fleet-c").values())
    assert '"presync.swap"' in gate and swap[:7] in gate, gate[-3000:]
    assert '"handoff.dark_until_switch"' in dark, dark[-3000:]
    since = time.time()
    assert [pod.spec.node_name for pod in ring_pods(argo, "fleet-candle-fleet-c")] == [FULL_NODE]
    assert not ring_pods(argo, "fleet-vllm-fleet-c") and selector_of(argo, "fleet-c") == VLLM

    text = (gitops.cluster.ROOT / SHARED).read_text().replace("name: fleet-vllm", "name: fleet-candle")
    switch = argo.git.repo.commit({SHARED: text}, "chat: candle-vllm in every ring (recreate's second commit)\n")
    for ring in RINGS:
        argo.refresh(ring)
    argo.wait("the switch rolled out", lambda: rolled_out(argo, switch), timeout=600, every=0.5)
    switched = time.monotonic() - started
    assert all(selector_of(argo, ring) == CANDLE for ring in RINGS)
    verified = "".join(argo.hook_logs(since, "cutover-verify-fleet-c").values())
    assert "cutover verify: OK" in verified and "candle" in verified, verified[-3000:]
    assert len(argo.git.cutover_commits()) == authored  # 0 commits by cutover in fleet mode
    MEASURED.append(f"a fleet with a full ring (recreate in two fleet commits): the swap rolled out in {swapped:.1f} s "
                    f"(fleet-c's gate judged the swap, its verifier said the name is dark until the switch), the "
                    f"switch in every ring verified at {switched:.1f} s, fleet-c's through its Service; 0 commits by "
                    "cutover")
