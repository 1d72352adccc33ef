"""An install people can adopt (docs/install.md): every example Application syncs on the first try, because each
object its source renders, hooks included, is one its AppProject permits, judged as ArgoCD judges it; no example
uses the project `default`; manifests/base names nothing of the example, and a consumer's overlay with a
namespace of its own builds and keeps the Roles where they belong.

ArgoCD's rules (AppProject spec, argo-cd docs "Projects"): a destination (server, namespace) must match one of
`destinations` (globs); a cluster-scoped kind must match `clusterResourceWhitelist` (empty: none) and not
`clusterResourceBlacklist`; a namespaced kind must match `namespaceResourceWhitelist` when it is set, and not
`namespaceResourceBlacklist`; a namespaced object without a namespace goes to the Application's destination
namespace; the source's repoURL must match `sourceRepos`. ArgoCD refuses the sync of an object that breaks one.
"""

from __future__ import annotations

import fnmatch
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest
from ruamel.yaml import YAML

from cutover.sources import kustomize_build

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "manifests" / "examples"
IN_CLUSTER = "https://kubernetes.default.svc"
# the cluster-scoped kinds the examples could hold; every other kind they hold must be one of NAMESPACED, so that
# a new kind makes this test name it instead of guessing its scope
CLUSTER_SCOPED = {("", "Namespace"), ("rbac.authorization.k8s.io", "ClusterRole"),
                  ("rbac.authorization.k8s.io", "ClusterRoleBinding"),
                  ("admissionregistration.k8s.io", "ValidatingAdmissionPolicy"),
                  ("admissionregistration.k8s.io", "ValidatingAdmissionPolicyBinding"),
                  ("apiextensions.k8s.io", "CustomResourceDefinition")}
NAMESPACED = {("", "ServiceAccount"), ("", "Service"), ("", "ConfigMap"), ("", "Secret"), ("apps", "Deployment"),
              ("batch", "Job"), ("batch", "CronJob"), ("networking.k8s.io", "NetworkPolicy"),
              ("rbac.authorization.k8s.io", "Role"), ("rbac.authorization.k8s.io", "RoleBinding")}


def yaml_docs(text: str) -> list[dict[str, Any]]:
    return [doc for doc in YAML(typ="safe").load_all(text) if doc]


def build(directory: Path) -> list[dict[str, Any]]:
    done = subprocess.run([*kustomize_build.require(), str(directory)], capture_output=True, text=True, timeout=60,
                          check=False)
    assert done.returncode == 0, f"kustomize build {directory}: {done.stderr}"
    return yaml_docs(done.stdout)


def rendered(source: dict[str, Any]) -> list[dict[str, Any]]:
    """What ArgoCD's repo-server renders for a path source of this repository: a kustomization, or the YAML files
    of a plain directory."""
    path = ROOT / source["path"]
    if (path / "kustomization.yaml").exists():
        return build(path)
    return [doc for file in sorted(path.glob("*.yaml")) for doc in yaml_docs(file.read_text())]


def group_kind(doc: dict[str, Any]) -> tuple[str, str]:
    group = doc["apiVersion"].rpartition("/")[0]
    return group, doc["kind"]


def _matches(rules: list[dict[str, str]], gk: tuple[str, str]) -> bool:
    return any(fnmatch.fnmatchcase(gk[0], rule.get("group", "")) and fnmatch.fnmatchcase(gk[1], rule["kind"])
               for rule in rules)


def violations(app: dict[str, Any], project: dict[str, Any], objects: list[dict[str, Any]]) -> list[str]:
    """Why ArgoCD would refuse each object of `objects` in `app`'s sync under `project` (empty: it syncs)."""
    spec, found = project["spec"], []
    destination = app["spec"]["destination"]
    for source in app["spec"].get("sources") or [app["spec"].get("source") or
                                                  app["spec"]["sourceHydrator"]["drySource"]]:
        if not any(fnmatch.fnmatchcase(source["repoURL"], repo) for repo in spec.get("sourceRepos", [])):
            found.append(f"source {source['repoURL']}: not in the project's sourceRepos")
    for doc in objects:
        gk, name = group_kind(doc), f"{doc['kind']}/{doc['metadata']['name']}"
        assert gk in CLUSTER_SCOPED | NAMESPACED, f"{name}: add its kind's scope to this test"
        if gk in CLUSTER_SCOPED:
            if not _matches(spec.get("clusterResourceWhitelist") or [], gk) or _matches(
                    spec.get("clusterResourceBlacklist") or [], gk):
                found.append(f"{name}: cluster-scoped kind not permitted")
            continue
        namespace = doc["metadata"].get("namespace") or destination["namespace"]
        if not any(all(fnmatch.fnmatchcase(destination.get(key, ""), allowed[key]) for key in ("server", "name")
                       if key in allowed) and fnmatch.fnmatchcase(namespace, allowed["namespace"])
                   for allowed in spec["destinations"]):
            found.append(f"{name}: namespace {namespace} is not a destination of the project")
        whitelist = spec.get("namespaceResourceWhitelist")
        if (whitelist and not _matches(whitelist, gk)) or _matches(spec.get("namespaceResourceBlacklist") or [], gk):
            found.append(f"{name}: kind not permitted in namespaces")
    return found


def applications() -> list[tuple[Path, dict[str, Any]]]:
    return [(path, doc) for path in sorted(EXAMPLES.rglob("*.yaml")) for doc in yaml_docs(path.read_text())
            if doc.get("kind") == "Application"]


PROJECTS = {doc["metadata"]["name"]: doc for path in EXAMPLES.rglob("*.yaml") for doc in yaml_docs(path.read_text())
            if doc.get("kind") == "AppProject"}
APPLICATIONS = applications()


@pytest.mark.parametrize(("path", "app"), APPLICATIONS, ids=[app["metadata"]["name"] for _, app in APPLICATIONS])
def test_every_example_application_syncs_under_a_project_of_its_own(path: Path, app: dict[str, Any]) -> None:
    project = app["spec"]["project"]
    assert project != "default", f"{app['metadata']['name']}: in the project `default`, which permits everything"
    assert project in PROJECTS, f"{app['metadata']['name']}: project {project} is not shipped with the example"
    assert app["spec"]["destination"]["server"] == IN_CLUSTER
    sources = app["spec"].get("sources") or [app["spec"].get("source") or app["spec"]["sourceHydrator"]["drySource"]]
    # a chart from a Helm repository cannot render here: its project's other rules are still checked
    objects = [doc for source in sources if "path" in source for doc in rendered(source)]
    assert violations(app, PROJECTS[project], objects) == []


def in_namespace(objects: list[dict[str, Any]], namespace: str) -> list[str]:
    return sorted(f"{doc['kind']}/{doc['metadata']['name']}" for doc in objects
                  if doc["metadata"].get("namespace") == namespace)


def hooks_of(application: str, *, plan: str) -> list[str]:
    """What a workload's hooks kustomization renders: its plan, its CronJobs and its hooks, under its suffix."""
    cronjobs = [f"CronJob/cutover-{job}-{application}" for job in ("audit", "rollback", "run")]
    hooks = [f"Job/cutover-{hook}-{application}" for hook in ("postsync", "presync", "syncfail")]
    return sorted([f"ConfigMap/{plan}", *cronjobs, *hooks])


def from_path(name: str, path: str) -> dict[str, Any]:
    """The example's Application `name` with its source at `path` (a copy of the tier's)."""
    (app,) = [app for _, app in APPLICATIONS if app["metadata"]["name"] == name]
    return {**app, "spec": {**app["spec"], "source": {**app["spec"]["source"], "path": path}}}


def test_the_workload_application_renders_its_hooks_and_the_plan_in_cutover() -> None:
    """What a user found: the hooks run in `cutover`, so the workload's project must permit it (and does)."""
    (app,) = [app for _, app in APPLICATIONS if app["metadata"]["name"] == "llm-serving"]
    objects = rendered(app["spec"]["source"])
    assert in_namespace(objects, "cutover") == hooks_of("llm-serving", plan="cutover-plan")
    narrower = {**PROJECTS["llm-serving"], "spec": {**PROJECTS["llm-serving"]["spec"], "destinations": [
        {"server": IN_CLUSTER, "namespace": "llm-serving"}]}}  # the project as it was shipped before
    refused = violations(app, narrower, objects)
    assert "Job/cutover-presync-llm-serving: namespace cutover is not a destination of the project" in refused
    assert "ConfigMap/cutover-plan: namespace cutover is not a destination of the project" in refused


@pytest.mark.parametrize(("path", "application", "plan"), [
    ("manifests/examples/llm-serving/workload", "llm-serving", "cutover-plan"),
    ("e2e/fixtures/chat-prod", "chat-prod", "cutover-plan-chat-prod"),  # a second Service, as "More Services" adds it
])
def test_each_workload_has_its_own_run_rollback_and_audit_on_its_own_plan(path: str, application: str,
                                                                          plan: str) -> None:
    """Only the first Service could be rolled back or audited: the CronJobs lived in the shared base and mounted
    `cutover-plan`, so during an incident on a second Service the documented rollback acted on the first. They come
    with each workload's hooks now, under its suffix, on its plan."""
    cronjobs = {doc["metadata"]["name"]: doc for doc in build(ROOT / path) if doc["kind"] == "CronJob"}
    assert sorted(cronjobs) == [f"cutover-{job}-{application}" for job in ("audit", "rollback", "run")]
    for cronjob in cronjobs.values():
        volumes = cronjob["spec"]["jobTemplate"]["spec"]["template"]["spec"]["volumes"]
        assert [volume["configMap"]["name"] for volume in volumes if "configMap" in volume] == [plan]
    assert not [doc for doc in build(ROOT / "manifests" / "base") if doc["kind"] == "CronJob"]


def test_a_further_workload_puts_its_hooks_beside_its_own_secrets_and_nowhere_else() -> None:
    """More Services: a second workload's hooks and plan run in its own credentials namespace, which its project
    permits, and its project permits no other workload's (`cutover`, another `cutover-*`): a writer of its path can
    put no pod beside another workload's Secrets (ArgoCD refuses the sync)."""
    app = from_path("chat-prod", "e2e/fixtures/chat-prod")  # the tier's copy: hooks added as step 4 adds them
    objects = rendered(app["spec"]["source"])
    assert in_namespace(objects, "cutover-chat-prod") == hooks_of("chat-prod", plan="cutover-plan-chat-prod")
    assert violations(app, PROJECTS["chat-prod"], objects) == []
    # and cutover's own Application, holding that namespace beside `cutover` (the tier's copy of the example with
    # two further workloads), syncs under its project
    own = from_path("cutover", "e2e/fixtures/cutover")
    rendered_own = rendered(own["spec"]["source"])
    assert {"cutover-chat-prod", "cutover-chat-helm"} <= {doc["metadata"].get("namespace") for doc in rendered_own}
    assert violations(own, PROJECTS["cutover"], rendered_own) == []
    presync = next(doc for doc in objects if doc["metadata"]["name"] == "cutover-presync-chat-prod")
    for elsewhere in ("cutover", "cutover-chat-helm"):
        moved = {**presync, "metadata": {**presync["metadata"], "namespace": elsewhere}}
        assert violations(app, PROJECTS["chat-prod"], [moved]) == [
            f"Job/cutover-presync-chat-prod: namespace {elsewhere} is not a destination of the project"]


def test_the_cutover_project_permits_nothing_cluster_wide_but_namespaces_and_its_admission_policies() -> None:
    spec = PROJECTS["cutover"]["spec"]
    admission = "admissionregistration.k8s.io"
    assert spec["clusterResourceWhitelist"] == [{"group": "", "kind": "Namespace"},
                                                {"group": admission, "kind": "ValidatingAdmissionPolicy"},
                                                {"group": admission, "kind": "ValidatingAdmissionPolicyBinding"}]
    (app,) = [app for _, app in APPLICATIONS if app["metadata"]["name"] == "cutover"]
    objects = rendered(app["spec"]["source"])
    widened = [*objects, {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
                          "metadata": {"name": "cutover-admin"}}]
    assert violations(app, PROJECTS["cutover"], widened) == ["ClusterRoleBinding/cutover-admin: cluster-scoped kind "
                                                             "not permitted"]


EXAMPLE_NAMES = ("llm-serving", "reasoning-long-predictor", "cutover-reasoning-long-predictor", "8080")


def _without_comments(path: Path) -> str:
    """The file without comments, and without argocd-server's own port (8080 is ArgoCD's there, not the example's)."""
    text = "\n".join(line.split("#", 1)[0] for line in path.read_text().splitlines())
    return text.replace("{protocol: TCP, port: 8080}", "") if "argocd-server" in text else text


def test_the_base_names_nothing_of_the_example() -> None:
    for folder in ("base", "namespace", "workload"):
        for path in sorted((ROOT / "manifests" / folder).glob("*.yaml")):
            for name in EXAMPLE_NAMES:
                assert name not in _without_comments(path), f"{path.relative_to(ROOT)} names the example's {name}"


def _overlay(tmp_path: Path, workload: dict[str, Any], *, namespace: str | None) -> Path:
    """A consumer's cutover kustomization: the base (under a namespace of theirs), the Component, their values."""
    overlay = tmp_path / "cutover"
    (overlay / "base").mkdir(parents=True)
    base = os.path.relpath(ROOT / "manifests" / "base", overlay / "base")
    (overlay / "base" / "kustomization.yaml").write_text(
        (f"namespace: {namespace}\n" if namespace else "") + f"resources: [{base}]\n")
    component = os.path.relpath(ROOT / "manifests" / "workload", overlay)
    # the replacements, as a consumer copies them from the example: its workload directory's and the image's
    example = EXAMPLES / "llm-serving" / "cutover"
    replacements = [entry for path in (example / "llm-serving" / "kustomization.yaml", example / "kustomization.yaml")
                    for entry in YAML(typ="safe").load(path.read_text())["replacements"]]
    YAML().dump({"resources": ["base", "workload.yaml"], "components": [component],
                 "replacements": replacements}, overlay / "kustomization.yaml")
    YAML().dump({"apiVersion": "cutover.dev/v1alpha1", "kind": "Workload",
                 "metadata": {"name": "cutover-workload",
                              "annotations": {"config.kubernetes.io/local-config": "true"}},
                 "spec": workload}, overlay / "workload.yaml")
    return overlay


def test_a_consumer_overlay_with_its_own_namespace_builds_and_keeps_each_role_in_place(tmp_path: Path) -> None:
    workload = {"namespace": "chat", "service": "chat-main", "port": 9000, "cutoverNamespace": "platform-cutover"}
    objects = build(_overlay(tmp_path, workload, namespace="platform-cutover"))
    placed = {(doc["kind"], doc["metadata"]["name"]): doc["metadata"].get("namespace") for doc in objects}
    assert placed[("Role", "cutover")] == "chat"
    assert placed[("ServiceAccount", "cutover")] == "platform-cutover"
    assert placed[("NetworkPolicy", "cutover-to-workload")] == "platform-cutover"
    assert {doc["metadata"]["name"] for doc in objects if doc["kind"] == "Namespace"} == {"platform-cutover"}
    for doc in objects:
        if doc["kind"] == "RoleBinding":
            assert doc["subjects"] == [{"kind": "ServiceAccount", "name": "cutover", "namespace": "platform-cutover"}]
    (role,) = [doc for doc in objects if (doc["kind"], doc["metadata"]["name"]) == ("Role", "cutover")]
    assert ["cutover-chat-main"] in [rule.get("resourceNames") for rule in role["rules"]]
    (egress,) = [doc for doc in objects if doc["metadata"]["name"] == "cutover-to-workload"]
    assert egress["spec"]["egress"][0]["ports"] == [{"protocol": "TCP", "port": 9000}]
    assert egress["spec"]["egress"][0]["to"][0]["namespaceSelector"]["matchLabels"] == {
        "kubernetes.io/metadata.name": "chat"}
    assert not any(doc["kind"] == "Workload" for doc in objects)  # local-config: never reaches the cluster


def test_renaming_the_image_is_one_change_that_the_pod_policy_follows(tmp_path: Path) -> None:
    """An install trap: renaming the image (`images: newName`) got every hook pod denied until a JSON pointer into
    the admission policy was patched too. Now one image Component names it for the hooks' kustomization and for
    cutover's, whose replacements (copied from the example's) write it into cutover-pod-pinned, by digest, with
    a second digest (the release before, during an upgrade) beside it."""
    renamed, digest, before = "registry.example.com:5000/platform/cutover", f"sha256:{'a' * 64}", f"sha256:{'b' * 64}"
    image = tmp_path / "image"
    image.mkdir()
    (image / "kustomization.yaml").write_text(
        "apiVersion: kustomize.config.k8s.io/v1alpha1\nkind: Component\n"
        f"images:\n  - {{name: cutover.invalid/cutover, newName: {renamed}, digest: '{digest}'}}\n"
        f"  - {{name: cutover.invalid/cutover-also, newName: {renamed}, digest: '{before}'}}\n")
    overlay = _overlay(tmp_path, {"namespace": "chat", "service": "chat-main", "port": 9000,
                                  "cutoverNamespace": "cutover"}, namespace=None)
    spec = YAML(typ="safe").load((overlay / "kustomization.yaml").read_text())
    spec["components"].append(os.path.relpath(image, overlay))
    YAML().dump(spec, overlay / "kustomization.yaml")
    (policy,) = [doc for doc in build(overlay) if doc["metadata"]["name"] == "cutover-pod-pinned"
                 and doc["kind"] == "ValidatingAdmissionPolicy"]
    variables = {v["name"]: v["expression"] for v in policy["spec"]["variables"]}
    assert variables["image"] == f"'{renamed}@{digest}'" and variables["also"] == f"'{renamed}@{before}'"
    hooks = tmp_path / "hooks"
    hooks.mkdir()
    (hooks / "kustomization.yaml").write_text(
        f"nameSuffix: -chat\ncomponents: [{os.path.relpath(ROOT / 'hooks', hooks)}, ../image]\n")
    images = {doc["spec"]["template"]["spec"]["containers"][0]["image"] if doc["kind"] == "Job" else
              doc["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"][0]["image"]
              for doc in build(hooks)}
    assert images == {f"{renamed}@{digest}"}  # the one name, by the digest the policy admits


def test_the_documented_faster_switch_removes_the_gates_job_once_read_and_changes_nothing_else(
        tmp_path: Path) -> None:
    """docs/install.md, "A switch sooner": its patch, beside the hooks Component under a workload's nameSuffix,
    gives the PreSync Job a ttlSecondsAfterFinished of 0 (ArgoCD 3's hook finalizer holds it until read; the real
    tier measures the switch with it, e2e/gitops/test_timing.py) and leaves every other object as it was."""
    import re

    text = (ROOT / "docs" / "install.md").read_text()
    (patch,) = re.findall(r"# workload/hooks/kustomization.yaml, added:\n(patches: +# beside components: the gate's "
                          r"Job removed.*?)```", text, re.S)
    hooks = os.path.relpath(ROOT / "hooks", tmp_path / "plain")
    for name, extra in (("plain", ""), ("sooner", patch)):
        (tmp_path / name).mkdir()
        (tmp_path / name / "kustomization.yaml").write_text(f"nameSuffix: -chat\ncomponents: [{hooks}]\n{extra}")
    plain, sooner = build(tmp_path / "plain"), build(tmp_path / "sooner")
    changed = [(before["metadata"]["name"], after["spec"]["ttlSecondsAfterFinished"])
               for before, after in zip(plain, sooner, strict=True) if before != after]
    assert changed == [("cutover-presync-chat", 0)]
    (gate,) = [doc for doc in plain if doc["metadata"]["name"] == "cutover-presync-chat"]
    assert gate["metadata"]["annotations"]["argocd.argoproj.io/hook-delete-policy"] == "BeforeHookCreation"


def test_the_documented_git_secret_lets_the_token_write_the_workload_but_not_cutovers_own_application() -> None:
    """docs/install.md's `cutover-git`: its `paths` take the example workload's files (the Service, the engines)
    and not the path of cutover's own Application, whose project may bind Roles in the workload's namespace."""
    import re

    from cutover.plan import credentials

    text = (ROOT / "docs" / "install.md").read_text()
    (paths,) = re.findall(r"--from-literal=paths='([^']+)'", text)
    patterns = [item.strip() for item in paths.split(",")]
    workload = ROOT / "manifests" / "examples" / "llm-serving" / "workload"
    for name in ("service.yaml", "engines.yaml"):
        assert credentials.allows(patterns, str((workload / name).relative_to(ROOT)))
    own = ROOT / "manifests" / "examples" / "llm-serving" / "cutover"
    for found in own.rglob("*"):
        assert not credentials.allows(patterns, str(found.relative_to(ROOT))), found


def test_the_cutover_namespace_outlives_its_application() -> None:
    """It holds the hand-made Secrets and every workload's hooks and plan: pruning or deleting cutover's own
    Application must not take it with them (ArgoCD's Prune=false and Delete=false, comma-separated as gitops-engine
    reads its sync options)."""
    (namespace,) = [doc for doc in build(ROOT / "manifests" / "base") if doc["kind"] == "Namespace"]
    options = namespace["metadata"]["annotations"]["argocd.argoproj.io/sync-options"].split(",")
    assert {"Prune=false", "Delete=false"} <= set(options)
