"""The plan's `service:` and `backends:` sections: the Service handed over and the backends it can select."""

from __future__ import annotations

import re
from collections.abc import Mapping

from cutover.plan.field import Field
from cutover.plan.git import read_repo_path
from cutover.plan.model import ENGINES, WORKLOAD_KINDS, Backend, ServiceRef, Workload, label_problem

_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_VALUES_KEY = re.compile(r"^[A-Za-z0-9_-]+(\.[A-Za-z0-9_-]+)*$")


def dns_label(node: Field) -> str:
    value = node.string()
    if len(value) > 63 or not _DNS_LABEL.match(value):
        raise node.fail("a DNS label (lowercase alphanumerics and '-', at most 63)")
    return value


def object_name(node: Field, *, default: str | None = None) -> str:
    """A Kubernetes object name (a DNS subdomain, at most 253): it goes into API request paths."""
    value = node.string(default=default)
    if len(value) > 253 or not _DNS_SUBDOMAIN.match(value):
        raise node.fail("a Kubernetes object name (a DNS subdomain: lowercase alphanumerics, '-' and '.')")
    return value


def read_service(node: Field) -> ServiceRef:
    node.mapping(("namespace", "name", "ports"), required=("namespace", "name"))
    ports = node.child("ports")
    port_list: tuple[int, ...] | None = None
    if ports.value is not None:
        if not isinstance(ports.value, list) or not ports.value:
            raise ports.fail("a non-empty list of Service port numbers")
        port_list = tuple(ports.child(i).integer(low=1, high=65535) for i in range(len(ports.value)))
    return ServiceRef(namespace=dns_label(node.child("namespace")), name=dns_label(node.child("name")),
                      ports=port_list)


def read_backends(node: Field) -> dict[str, Backend]:
    if not isinstance(node.value, Mapping) or len(node.value) < 2:
        raise node.fail("a mapping of at least two backends (the one serving now and the target)")
    backends: dict[str, Backend] = {}
    for name, field in node.items():
        # docs/plan.md: a backend's name goes into branch names, trailers and URLs: a DNS label, checked by name
        dns_label(Field(field.source, field.path, name))
        field.mapping(("selector", "engine", "port", "gitValue", "workload", "model"),
                      required=("selector", "engine", "port"))
        backends[name] = Backend(
            name=name,
            selector=_read_selector(field.child("selector")),
            engine=field.child("engine").string(choices=ENGINES),
            port=field.child("port").integer(low=1, high=65535),
            git_value=field.child("gitValue").string() if field.present("gitValue") else None,
            workload=_read_workload(field.child("workload")) if field.present("workload") else None,
            model=_read_model(field.child("model")) if field.present("model") else None,
        )
    by_selector: dict[tuple[tuple[str, str], ...], str] = {}
    for name, backend in backends.items():
        key = tuple(sorted(backend.selector.items()))
        if key in by_selector:
            raise node.child(name).child("selector").fail(
                f"a selector different from backend {by_selector[key]!r} (two backends cannot share pods)"
            )
        by_selector[key] = name
    for name, backend in backends.items():
        if wider := next((other for other in backends.values() if other.name != name
                          and backend.selector.items() < other.selector.items()), None):
            raise node.child(name).child("selector").fail(
                f"a selector that is not part of another backend's ({_labels(backend.selector)} is part of "
                f"{wider.name}'s {_labels(wider.selector)}: a Service selecting {name} would select {wider.name}'s "
                f"pods too; add a label that only {name}'s pods carry)")
    return backends


def _read_model(node: Field) -> str:
    model = node.string()
    if not model.strip() or len(model) > 512:
        raise node.fail("the model id or path /v1/models reports (a non-empty string of at most 512 characters)")
    return model


def _labels(selector: Mapping[str, str]) -> str:
    return "{" + ", ".join(f"{key}={value}" for key, value in sorted(selector.items())) + "}"


def _read_selector(node: Field) -> dict[str, str]:
    if not isinstance(node.value, Mapping) or not node.value:
        raise node.fail("a non-empty mapping of label keys to values")
    selector: dict[str, str] = {}
    for key, field in node.items():
        if not isinstance(field.value, str):
            raise field.fail("a string label value (quote values such as true, 1.0 or on)")
        problem = label_problem(key, field.value)
        if problem:
            raise field.fail(f"valid Kubernetes label syntax ({problem})")
        selector[key] = field.value
    return selector


REPLICA_KEYS = ("replicas", "replicaCount")  # how charts name a Deployment's count (Helm's own starter: replicaCount)


def _read_workload(node: Field) -> Workload:
    """docs/capacity.md: the object that holds the backend's GPUs, where it is written, and so the one field that
    frees it (spec.replicas, a kustomization's `replicas:` entry, a values key, or KServe's stop annotation)."""
    node.mapping(("kind", "name", "path", "valuesKey"), required=("kind", "name"))
    kind = node.child("kind").string(choices=WORKLOAD_KINDS)
    name = object_name(node.child("name"))
    path = read_repo_path(node.child("path")) if node.present("path") else None
    key_field = node.child("valuesKey")
    values_key = key_field.string() if key_field.value is not None else None
    if values_key is not None:
        if kind == "InferenceService":
            raise key_field.fail("no valuesKey (an InferenceService is stopped by its annotation, not by replicas)")
        if not _VALUES_KEY.match(values_key):
            raise key_field.fail("a dotted path of keys, such as engine.vllm.replicas")
        if values_key.rsplit(".", 1)[-1] not in REPLICA_KEYS:  # a free writes 0 there: never any other setting
            raise key_field.fail(f"a replica count's key, ending in {' or '.join(REPLICA_KEYS)} (a handoff writes "
                                 "0 there and puts the count back)")
        if path is None:
            raise node.child("path").fail("the values file that holds valuesKey")
    return Workload(kind=kind, name=name, path=path, values_key=values_key)
