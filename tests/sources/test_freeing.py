"""Freeing and restoring a backend through Git (docs/capacity.md): one field changes, every other byte stays, and
the restore writes back exactly what was there, for each kind of file a workload lives in."""

from __future__ import annotations

import textwrap

import pytest

from cutover.errors import InvalidInput
from cutover.plan import Backend, GitDocument, Workload
from cutover.sources import field_edit, freeing
from cutover.sources.field_edit import FieldRef, Item
from cutover.sources.yaml_edit import GuardFailed

DEPLOYMENT = textwrap.dedent("""\
    # vLLM for reasoning-long: it holds the node's only free card
    # (see the runbook before touching replicas)
    apiVersion: apps/v1
    kind: Deployment
    metadata:
      name: llm-reasoning   # the name KServe-less clusters use
      namespace: llm-serving
    spec:
      replicas: 1           # one card: 4 of 4 GPUs allocated
      selector:
        matchLabels: {app.kubernetes.io/name: llm-reasoning}
      template:
        spec:
          containers:
            - name: vllm
              resources:
                limits: {nvidia.com/gpu: 1}
    ---
    apiVersion: v1
    kind: Service
    metadata:
      name: other
    spec:
      selector: {app: other}
    """)
KUSTOMIZATION = textwrap.dedent("""\
    apiVersion: kustomize.config.k8s.io/v1beta1
    kind: Kustomization
    resources: [deployment.yaml]
    replicas:
      - name: llm-reasoning   # vLLM
        count: 1
      - name: coder
        count: 2
    """)
VALUES = "engine:\n  vllm:\n    replicas: 1  # per node\n    image: vllm/vllm-openai\n"
ISVC = textwrap.dedent("""\
    apiVersion: serving.kserve.io/v1beta1
    kind: InferenceService
    metadata:
      name: reasoning
      namespace: llm-serving
    spec:
      predictor:
        model: {modelFormat: {name: vllm}}
    """)


def backend(workload: Workload) -> Backend:
    return Backend("vllm", {"app.kubernetes.io/name": "llm-reasoning"}, "vllm", 8080, workload=workload)


CASES = [
    ("a Deployment's own file", DEPLOYMENT, Workload("Deployment", "llm-reasoning"), "k8s/vllm.yaml",
     "-  replicas: 1           # one card: 4 of 4 GPUs allocated\n+  replicas: 0           # one card: 4 of 4 GPUs "
     "allocated\n", "1"),
    ("a Deployment without replicas (1 by default)", DEPLOYMENT.replace(
        "  replicas: 1           # one card: 4 of 4 GPUs allocated\n", ""), Workload("Deployment", "llm-reasoning"),
     "k8s/vllm.yaml", "+  replicas: 0\n", "absent"),
    ("a kustomization's replicas entry", KUSTOMIZATION,
     Workload("Deployment", "llm-reasoning", path="k8s/overlays/prod/kustomization.yaml"), "unused",
     "-    count: 1\n+    count: 0\n", "1"),
    ("a Helm values key", VALUES,
     Workload("StatefulSet", "vllm", path="values.yaml", values_key="engine.vllm.replicas"),
     "unused", "-    replicas: 1  # per node\n+    replicas: 0  # per node\n", "1"),
    ("an InferenceService", ISVC, Workload("InferenceService", "reasoning"), "k8s/isvc.yaml",
     "+  annotations:\n+    serving.kserve.io/stop: \"true\"\n", "absent"),
    ("an InferenceService started again by false", ISVC.replace(
        "  name: reasoning\n", "  name: reasoning\n  annotations:\n    serving.kserve.io/stop: 'false'\n"),
     Workload("InferenceService", "reasoning"), "k8s/isvc.yaml",
     "-    serving.kserve.io/stop: 'false'\n+    serving.kserve.io/stop: 'true'\n", "false"),
]


@pytest.mark.parametrize(("why", "text", "workload", "default", "changed", "previous"), CASES,
                         ids=[case[0] for case in CASES])
def test_free_changes_one_field_and_restore_writes_back_what_was_there(
        why: str, text: str, workload: Workload, default: str, changed: str, previous: str) -> None:
    where = freeing.freeing(backend(workload), default_path=default)
    assert where.path == (workload.path or default)
    freed = freeing.free(text, where)
    assert freed.changed and changed in freed.diff(where.path)
    assert freeing.previous_of(freed) == previous
    assert field_edit.read_field(freed.after, where.field) == str(where.freed)
    again = freeing.free(freed.after, where)
    assert not again.changed  # freeing twice commits nothing the second time
    restored = freeing.restore(freed.after, where, previous=previous, added=freed.created)
    assert restored.after == text  # byte for byte: comments, layout, the other documents


def test_the_fields_by_workload() -> None:
    assert str(freeing.freeing(backend(Workload("Deployment", "x")), default_path="a.yaml").field) == "spec.replicas"
    kserve = freeing.freeing(backend(Workload("InferenceService", "x")), default_path="a.yaml")
    assert str(kserve.field) == "metadata.annotations[serving.kserve.io/stop]" and kserve.freed == "true"
    kustomized = freeing.freeing(backend(Workload("StatefulSet", "x", path="o/kustomization.yml")), default_path="")
    assert str(kustomized.field) == "replicas[name=x].count" and kustomized.freed == 0
    with pytest.raises(ValueError, match="names no workload"):
        freeing.freeing(Backend("b", {"a": "b"}, "vllm", 1), default_path="a.yaml")


def test_crlf_files_stay_crlf() -> None:
    text = DEPLOYMENT.replace("\n", "\r\n")
    where = freeing.freeing(backend(Workload("Deployment", "llm-reasoning")), default_path="d.yaml")
    freed = freeing.free(text, where)
    assert "replicas: 0           # one card" in freed.after and "\n" not in freed.after.replace("\r\n", "")
    nothing = text.replace("  replicas: 1           # one card: 4 of 4 GPUs allocated\r\n", "")
    added = freeing.free(nothing, where)
    assert "  replicas: 0\r\n" in added.after
    assert freeing.restore(added.after, where, previous="absent", added=0).after == nothing


@pytest.mark.parametrize(("why", "text", "field", "cause", "words"), [
    ("no such object", DEPLOYMENT, FieldRef(GitDocument("Deployment", "coder"), ("spec", "replicas")),
     "document_not_found", "no document with kind Deployment and metadata.name coder"),
    ("no replicas entry for it", KUSTOMIZATION, FieldRef(GitDocument("", ""), ("replicas", Item("name", "x"), "count")),
     "selector_path_missing", "no list entry name=x to write into"),
    ("a mapping where a scalar belongs", DEPLOYMENT, FieldRef(GitDocument("Deployment", "llm-reasoning"),
                                                              ("spec", "selector")),
     "selector_not_mapping", "expected a scalar, found a mapping"),
    ("a mapping written inline", "a: {b: 1}\n", FieldRef(GitDocument("", ""), ("a", "c")), "selector_not_mapping",
     "empty or written inline"),
    ("an anchor in the document", "a: &x 1\nb: *x\n", FieldRef(GitDocument("", ""), ("a",)), "selector_alias",
     "anchors or aliases"),
    ("an object read as a values file (F3)", DEPLOYMENT.split("---")[0],
     FieldRef(GitDocument("", ""), ("spec", "replicas"), values=True),
     "not_values_file", "expected a Helm values file, found a Kubernetes object"),
])
def test_what_cannot_be_edited_safely_is_refused_by_name(why: str, text: str, field: FieldRef, cause: str,
                                                        words: str) -> None:
    with pytest.raises(InvalidInput) as caught:
        field_edit.set_field(text, field, 0, source="k8s/vllm.yaml")
    assert caught.value.cause == cause and words in caught.value.message and caught.value.hint
    assert caught.value.message.startswith("k8s/vllm.yaml")


def test_the_guard_refuses_an_edit_that_changes_more_than_the_field() -> None:
    field = FieldRef(GitDocument("Deployment", "llm-reasoning"), ("spec", "replicas"))
    honest = field_edit.set_field(DEPLOYMENT, field, 0)
    sneaky = field_edit.FieldEdit(DEPLOYMENT, honest.after.replace("name: other", "name: mine"), field, "1", 0)
    with pytest.raises(GuardFailed, match=r"changed more than spec\.replicas"):
        field_edit.guard(sneaky)
    extra_line = field_edit.FieldEdit(DEPLOYMENT, honest.after.replace("# (see", "#  (see"), field, "1", 0)
    with pytest.raises(GuardFailed, match=r"changed 2 lines for spec\.replicas, at most 1"):
        field_edit.guard(extra_line)


def test_what_a_restore_puts_back() -> None:
    """What the free commit recorded, exactly; for a workload committed stopped, its first start."""
    from cutover.core.trailers import Trailers

    deployment = freeing.freeing(Backend("vllm", {}, "vllm", 8000, workload=Workload("Deployment", "v")),
                                 default_path="engines.yaml")
    isvc = freeing.freeing(Backend("vllm", {}, "vllm", 8000, workload=Workload("InferenceService", "r")),
                           default_path="isvc.yaml")
    recorded = Trailers(plan="p", step="free", backend="vllm", previous="3", added="2")
    assert freeing.put_back(deployment, recorded, replicas=1) == freeing.PutBack("3", 2, True)
    assert freeing.put_back(deployment, None, replicas=2) == freeing.PutBack("2", 0, False)
    assert freeing.put_back(deployment, Trailers(plan="p", step="restore", backend="vllm"), replicas=1) == \
        freeing.PutBack("1", 0, False)  # a restore records nothing to put back
    assert freeing.put_back(isvc, None, replicas=1) == freeing.PutBack("false", 0, False)
    # the review's N4: a trailer is text anyone who may commit could write, and a restore writes it back
    for previous, added in (("0\n    securityContext: {runAsUser: 0}", "0"), ("1000000", "0"), ("-1", "0"),
                            ("3", "40"), ("{runAsUser: 0}", None)):
        forged = Trailers(plan="p", step="free", backend="vllm", previous=previous, added=added)
        assert freeing.put_back(deployment, forged, replicas=1) == freeing.PutBack("1", 0, False), previous
    assert freeing.put_back(isvc, Trailers(plan="p", step="free", backend="vllm", previous="x: y"), replicas=1) == \
        freeing.PutBack("false", 0, False)
    assert freeing.put_back(isvc, Trailers(plan="p", step="free", backend="vllm", previous="absent"), replicas=1) == \
        freeing.PutBack("absent", 0, True)


def test_a_workload_of_another_namespace_is_never_freed() -> None:
    """The review's N4: a plan naming another team's Deployment of the same kind and name, in the same file or a
    kustomization that sets its namespace: only the Service's namespace is written."""
    where = freeing.freeing(Backend("vllm", {}, "vllm", 8000, workload=Workload("Deployment", "llm-reasoning")),
                            default_path="engines.yaml", namespace="llm-serving")
    elsewhere = DEPLOYMENT.replace("  namespace: llm-serving\n", "  namespace: team-b\n", 1)
    assert "namespace: team-b" in elsewhere
    with pytest.raises(InvalidInput) as caught:
        freeing.free(elsewhere, where, source="engines.yaml")
    assert caught.value.cause == "workload_elsewhere" and "not the Service's (llm-serving)" in caught.value.message
    assert freeing.free(DEPLOYMENT, where, source="engines.yaml").changed
    kustomization = "namespace: team-b\nresources: [engines.yaml]\nreplicas:\n  - {name: llm-reasoning, count: 1}\n"
    listed = freeing.freeing(Backend("vllm", {}, "vllm", 8000, workload=Workload("Deployment", "llm-reasoning")),
                             default_path="kustomization.yaml", namespace="llm-serving")
    with pytest.raises(InvalidInput, match="in namespace team-b"):
        freeing.free(kustomization, listed, source="kustomization.yaml")
