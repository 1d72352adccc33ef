"""The origin cluster as an example, synced (manifests/examples/full-gpu): the `llm-serving` Application pointed at
the example's recreate path, as its README says (here through a copy that adds the tier's timeline and the tier's Git
host to the example's plan, nothing else), on a full node: vLLM on one card, another team's pod on the other.

- `cutover plan`, from the workload's CronJob as a person runs it, refuses (exit 2) while the Git token's `paths`
  leave out the example's own file, the one a handoff edits: install.md's step 2 names the Service's files only;
- with the file added to `paths`, it says READY, that candle is stopped in Git and the handoff starts it, and the
  next hop;
- a person's commit of `target: candle` runs the recreate through the example's `replicas:` entries (vLLM freed and
  candle started in one sync, candle proven, the switch), and `target: vllm` brings it back the same way, leaving
  the example's file as shipped, comments and all.

It runs after the package's other scenarios (`late`: the story counts cutover's commits from none), starts from
vLLM serving alone whatever they left, and puts back what it found (the Application's path, the files, the
Secret) for the after-all audit."""

from __future__ import annotations

import json
import re
import textwrap
import time
from collections.abc import Iterator

import kubernetes
import pytest
from ruamel.yaml import YAML

from conftest import MEASURED
from tier import cluster, githost, gitops
from tier.handoff import HOLDER, Auditing, Client, handoff_commits, pods, recreated, serving, startup_of

EXAMPLE = cluster.ROOT / "manifests" / "examples" / "full-gpu"
LAYOUT = "manifests/examples/full-gpu/recreate/kustomization.yaml"  # the file each backend's `workload` names
COPY = "e2e/fixtures/full-gpu"  # the tier's copy of the Application's path, written by this module
TIER = {  # the example's plan → the tier's: its Git host, its timeline (a 20 s startup budget), one fitness trial
    "  url: https://github.com/acme/gitops.git\n":
        f"  url: {githost.REPO_URL}\n  apiUrl: https://{githost.ADDRESS[0]}:{githost.ADDRESS[1]}\n"
        "  caFile: /var/run/secrets/cutover/git/ca.crt\n",
    "  maxWait: 30m\n": "  maxWait: 60s\n",
    "  requestTimeout: 10s\n": "  requestTimeout: 5s\n",
    "    requests: 3\n": "    requests: 1\n",
    "    compare: true\n": "    compare: false\n",  # the real vLLM's context is the tier's, not the point here
    "  maxGap: 45m ": "  maxGap: 90s ",
    "  drainTimeout: 5m\n": "  drainTimeout: 10s\n",
}


def tier_plan(target: str) -> str:
    """The example's plan as the tier runs it (TIER), its Slack left out (the tier has none)."""
    text = (EXAMPLE / "recreate" / "plan.yaml").read_text()
    text = text[:text.index("notify:\n")]
    for shipped, ours in TIER.items():
        assert text.count(shipped) == 1, f"the example's plan no longer has {shipped!r}"
        text = text.replace(shipped, ours)
    text, done = re.subn(r"(?m)^target: \w+", f"target: {target}", text, count=1)
    assert done == 1, "the example's plan names no target"
    return text


def plan_configmap(name: str, target: str) -> str:
    return (f"apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: {name}, namespace: cutover}}\ndata:\n"
            f"  plan.yaml: |\n{textwrap.indent(tier_plan(target), '    ')}")


def copy_files(target: str) -> dict[str, str]:
    """The Application's path in the tier: the example's, on the tier's timeline, with the tier's plan."""
    return {f"{COPY}/kustomization.yaml": "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\n"
                                          "resources: [../../../manifests/examples/full-gpu/recreate]\n"
                                          "components: [../timeline]\npatches: [{path: plan.yaml}]\n",
            f"{COPY}/plan.yaml": plan_configmap("cutover-plan", target)}


def counts(argo: gitops.GitOpsTier) -> dict[str, int]:
    """The `replicas:` entries of the example's file at the branch head."""
    found = argo.git.repo.read(LAYOUT)
    assert found is not None
    return {entry["name"]: entry["count"] for entry in YAML(typ="safe").load(found[0])["replicas"]}


def at_path(argo: gitops.GitOpsTier, path: str, revision: str) -> None:
    """The Application synced and Healthy at `revision`, compared from `path`."""
    argo.wait(f"llm-serving synced from {path}", lambda: argo.app("llm-serving").get("status", {}).get(
        "sync", {}).get("comparedTo", {}).get("source", {}).get("path") == path, timeout=120)
    argo.wait_app("llm-serving", synced=True, healthy=True, revision=revision, timeout=240)


def point(argo: gitops.GitOpsTier, path: str) -> None:
    argo.kubectl("-n", "argocd", "patch", "application", "llm-serving", "--type", "merge",
                 "-p", json.dumps({"spec": {"source": {"path": path}}}))


def git_paths(argo: gitops.GitOpsTier, paths: str) -> None:
    argo.kubectl("-n", "cutover", "patch", "secret", "cutover-git", "--type", "merge",
                 "-p", json.dumps({"stringData": {"paths": paths}}))


def cutover_plan(argo: gitops.GitOpsTier, name: str) -> tuple[int | None, str]:
    """`cutover plan --output json` for `target: candle`, in a Job of the workload's run CronJob (its pod, its
    Secrets), as a person runs it before committing: its exit code and log."""
    argo.job_from_cronjob("cutover-run-llm-serving", name, ["plan", "--output", "json"],
                          plan="cutover-plan-full-gpu", kept=True)
    result = argo.finished(name, timeout=180)
    return result.exit_code, result.log


pytestmark = pytest.mark.late


def vllm_alone(argo: gitops.GitOpsTier) -> None:
    """Where the example starts: vLLM serving, candle stopped (whatever the scenarios before left), so that another
    team's pod can take the node's other card."""
    if serving(argo) != "vllm":
        found = argo.git.repo.read(gitops.PLAN)
        assert found is not None
        argo.commit({gitops.PLAN: gitops.with_target(found[0], "vllm")}, "Back to vLLM before the full-GPU example\n")
        argo.wait("the Service to select vllm", lambda: serving(argo) == "vllm", timeout=300)
        argo.wait_app("llm-serving", synced=True, healthy=True, timeout=180)
    found = argo.git.repo.read(gitops.ENGINES)
    assert found is not None
    stopped, done = re.subn(r"(  name: llm-reasoning-candle\n  namespace: llm-serving\n(?:  annotations: .*\n)?"
                            r"spec:\n  replicas: )\d+", r"\g<1>0", found[0])
    if done:
        sha = argo.commit({gitops.ENGINES: stopped}, "candle stopped before the full-GPU example\n")
        argo.wait_app("llm-serving", synced=True, healthy=True, revision=sha, timeout=180)
    argo.wait("candle's pods gone", lambda: not pods(argo, "candle"), timeout=120)


@pytest.fixture(scope="module")
def full_node(argo: gitops.GitOpsTier) -> Iterator[None]:
    """vLLM serving alone on one card of the GPU node, another team's pod on the other; the plan Job's ConfigMap.
    Everything it changes is put back at the end."""
    vllm_alone(argo)
    found = {path: argo.git.repo.read(path) for path in (gitops.ENGINES, gitops.PLAN, gitops.SERVICE)}
    before = {path: text[0] for path, text in found.items() if text is not None}
    holder, configmap = argo.dir / "full-gpu-coder.yaml", argo.dir / "cutover-plan-full-gpu.yaml"
    holder.write_text(HOLDER)
    argo.kubectl("apply", "-f", str(holder))
    argo.wait("the coder bound to the GPU node", lambda: argo.core.read_namespaced_pod(
        "coder", "default").spec.node_name == "kwok-gpu-0", timeout=60)
    configmap.write_text(plan_configmap("cutover-plan-full-gpu", "candle"))
    argo.kubectl("apply", "-f", str(configmap))
    try:
        yield
    finally:
        argo.kubectl("delete", "-f", str(configmap), "--ignore-not-found")
        back = argo.commit(before, "The tier's llm-serving files as the full-GPU example found them\n")
        point(argo, gitops.PATHS["manifests/examples/llm-serving/workload"])
        at_path(argo, gitops.PATHS["manifests/examples/llm-serving/workload"], back)
        git_paths(argo, cluster.WRITABLE["cutover"])
        argo.kubectl("delete", "-f", str(holder), "--ignore-not-found", "--wait=true")


def test_full_gpu_cutover_plan_refuses_a_token_short_of_the_examples_file_then_says_the_hops(
        argo: gitops.GitOpsTier, full_node: None) -> None:
    """Before anything is committed: the Secret as install.md's step 2 writes it (the Service's files) refuses the
    plan, naming the file and the key; with the example's file added, the Application pointed at the example's
    path (candle committed stopped), `cutover plan` says READY and how the handoff goes."""
    code, log = cutover_plan(argo, "cutover-plan-full-gpu-short")
    assert code == 2, log[-2000:]
    assert "cutover-git/paths" in log and LAYOUT in log, log[-2000:]

    git_paths(argo, f"{cluster.WRITABLE['cutover']},{LAYOUT}")  # what the example's README asks of step 2
    engines = (cluster.ROOT / gitops.ENGINES).read_text()  # both engines; the example's `replicas:` set them
    moved = argo.git.repo.commit({gitops.ENGINES: engines, **copy_files("vllm")},
                                 "reasoning-long as the full-GPU example lays it out\n")
    point(argo, COPY)
    at_path(argo, COPY, moved)
    deployments = {d.metadata.name: d.spec.replicas for d in
                   kubernetes.client.AppsV1Api(argo.api).list_namespaced_deployment("llm-serving").items}
    assert (deployments["llm-reasoning"], deployments["llm-reasoning-candle"]) == (1, 0), deployments
    assert serving(argo) == "vllm" and not pods(argo, "candle")

    code, log = cutover_plan(argo, "cutover-plan-full-gpu")
    lines = log.splitlines()  # the report, indented, between the pod's one-line JSON logs
    report = json.loads("\n".join(lines[lines.index("{"):len(lines) - lines[::-1].index("}")]))
    assert code == 0 and report["ready"] is True, log[-3000:]
    assert report["targetProof"] == {"stopped": True, "strategy": "recreate"}, report
    assert report["handoff"]["next"] == "restore candle, draining and freeing vllm in the same sync", report
    MEASURED.append(f"full-GPU example: cutover plan refused a token short of {LAYOUT} (exit 2), then READY: "
                    f"{report['handoff']['next']}")


@pytest.mark.parametrize("target", ["candle", "vllm"])
def test_full_gpu_recreate_through_the_examples_replicas_entries(argo: gitops.GitOpsTier, full_node: None,
                                                                 target: str) -> None:
    """A person's commit of the plan's target: the example's own file edited by the handoff's hops (the source
    freed and the target started in one commit, ArgoCD applying both in one sync), the target proven and switched,
    the gap said; there and back, the file ends as shipped."""
    source = "vllm" if target == "candle" else "candle"
    assert serving(argo) == source
    known = {entry.sha for entry in argo.git.repo.log(limit=30)}
    started, since = time.monotonic(), time.time()
    with Client(f"{argo.service().spec.cluster_ip}:80") as client, Auditing(argo):
        argo.commit({f"{COPY}/plan.yaml": plan_configmap("cutover-plan", target)},
                    f"Hand reasoning-long to {target} on the full node\n")
        closed = recreated(argo, known, target, since, client, timeout=300)
    took, gap, startup = time.monotonic() - started, float(closed["seconds"]), startup_of(argo, target)
    MEASURED.append(f"full-GPU example, recreate {source} -> {target}: the person's commit to the switch verified "
                    f"{took:.1f} s, the gap (free commit to verified) {gap:.1f} s = the target's startup {startup:.0f} "
                    f"s + {gap - startup:.1f} s, the client's {client.longest_gap():.1f} s "
                    f"({len(client.failed)} of {len(client.asked)} requests failed)")
    made = {(trailers.step, trailers.backend) for trailers in handoff_commits(argo, known) if trailers.step}
    assert made == {("free", source), ("restore", target)}, made
    assert argo.service().spec.selector == (gitops.CANDLE if target == "candle" else gitops.VLLM)
    assert counts(argo) == {"llm-reasoning": int(target == "vllm"), "llm-reasoning-candle": int(target == "candle")}
    assert not pods(argo, source)  # freed: its card the target's now
    if target == "vllm":  # there and back: the example's file as shipped, every comment kept
        found = argo.git.repo.read(LAYOUT)
        assert found is not None and found[0] == (cluster.ROOT / LAYOUT).read_text()
