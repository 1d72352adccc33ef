"""Whether the workload a plan names for a backend is that backend's (docs/security.md, "A handoff touches only its
own engines"): a free sets the named workload to zero, so it must be the one running the backend's pods, never
another team's Deployment of the plan's choosing. Read from the pods of the Service's namespace, which cutover may
list: each pod of the named workload carries the backend's selector (its pod template does), and each running pod
the backend selects belongs to that workload (else freeing it would not free the backend). Pure.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from cutover.core.views import PodView

KSERVE = "serving.kserve.io/inferenceservice"  # the label KServe puts on an InferenceService's pods


def belongs(pod: PodView, *, kind: str, name: str, namespace: str) -> bool:
    """Whether `pod` is one of the workload `kind/name`'s in `namespace`: its KServe label, or the name its
    controller gave it (a Deployment's `<name>-<pod-template-hash>-…`, a StatefulSet's `<name>-<ordinal>`)."""
    if pod.namespace != namespace:
        return False
    if kind == "InferenceService":
        return pod.labels.get(KSERVE) == name
    return _told(pod, kind) and pod.workload == f"{namespace}/{name}"


def _told(pod: PodView, kind: str) -> bool:
    """Whether the pod's labels say which workload of `kind` it is (a controller's; a pod made by hand, or labelled
    like KServe's by a plain Deployment, says nothing either way)."""
    if kind == "InferenceService":
        return KSERVE in pod.labels
    template = pod.labels.get("pod-template-hash")
    # a long Deployment name is cut short in its pods' names, hash and all: such a pod says nothing either way
    return bool(template and f"-{template}-" in pod.name) or "statefulset.kubernetes.io/pod-name" in pod.labels


def stranger(pods: Iterable[PodView], *, kind: str, name: str, namespace: str,
             selector: Mapping[str, str]) -> str | None:
    """Why `kind/name` is not the workload of the backend `selector` selects (what is wrong, in words), or None.
    A workload with no pod and a backend with no pod say nothing either way: freeing what runs nothing stops
    nothing."""
    live = [pod for pod in pods if pod.phase not in ("Succeeded", "Failed")]
    theirs = [pod for pod in live if belongs(pod, kind=kind, name=name, namespace=namespace)]
    unselected = [pod.name for pod in theirs if not pod.matches(selector)]
    if unselected:
        return (f"the pods of {kind} {name} ({_few(unselected)}) do not carry the backend's selector "
                f"{_shown(selector)}: it runs another engine")
    elsewhere = [pod.name for pod in live if pod.matches(selector) and pod not in theirs and _told(pod, kind)]
    if elsewhere:
        return (f"the backend's pods ({_few(elsewhere)}) are not {kind} {name}'s: freeing it would not stop them")
    return None


def _few(names: list[str]) -> str:
    return ", ".join(sorted(names)[:3]) + (f" and {len(names) - 3} more" if len(names) > 3 else "")


def _shown(selector: Mapping[str, str]) -> str:
    return ",".join(f"{key}={value}" for key, value in selector.items())
