"""The emulated API server fills kmock 0.8's gaps; each gap is checked here through the official client."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import kubernetes.client
import pytest
from kubernetes.client.exceptions import ApiException

from cutover.demo.kube import KubeEmulator
from cutover.demo.world import World
from helpers import PODS, fail_first


@pytest.fixture
async def core(world: World) -> AsyncIterator[kubernetes.client.CoreV1Api]:
    config = kubernetes.client.Configuration()
    config.host = world.url
    config.retries = False
    with kubernetes.client.ApiClient(config) as api:
        yield kubernetes.client.CoreV1Api(api)


async def call(function: Any, *args: Any, **kwargs: Any) -> Any:
    return await asyncio.to_thread(function, *args, **kwargs)


def pod(name: str, **labels: str) -> dict[str, Any]:
    return {"metadata": {"name": name, "labels": labels}, "spec": {"containers": [{"name": "c", "image": "i"}]}}


async def test_writes_get_uid_resource_version_timestamps_and_the_url_namespace(
        core: kubernetes.client.CoreV1Api) -> None:
    created = await call(core.create_namespaced_pod, "ns-a", pod("p1", app="x"))
    assert created.metadata.namespace == "ns-a"  # taken from the URL, not the body
    assert created.metadata.uid and created.metadata.creation_timestamp is not None
    first = int(created.metadata.resource_version)
    patched = await call(core.patch_namespaced_pod, "p1", "ns-a", {"metadata": {"labels": {"v": "2"}}})
    assert int(patched.metadata.resource_version) > first
    assert patched.metadata.uid == created.metadata.uid
    assert patched.metadata.labels == {"app": "x", "v": "2"}


async def test_generate_name_and_conflicts(core: kubernetes.client.CoreV1Api) -> None:
    unnamed = {"metadata": {"generateName": "job-"}, "spec": {"containers": [{"name": "c"}]}}
    made = await call(core.create_namespaced_pod, "ns", unnamed)
    assert made.metadata.name.startswith("job-") and len(made.metadata.name) == 9
    await call(core.create_namespaced_pod, "ns", pod("same"))
    with pytest.raises(ApiException) as caught:
        await call(core.create_namespaced_pod, "ns", pod("same"))
    assert caught.value.status == 409


async def test_put_replaces_and_checks_the_resource_version(core: kubernetes.client.CoreV1Api) -> None:
    created = await call(core.create_namespaced_pod, "ns", pod("p", a="1"))
    body = core.api_client.sanitize_for_serialization(created)
    body["metadata"]["labels"] = {"b": "2"}
    replaced = await call(core.replace_namespaced_pod, "p", "ns", body)
    assert replaced.metadata.labels == {"b": "2"}
    with pytest.raises(ApiException) as caught:
        await call(core.replace_namespaced_pod, "p", "ns", body)  # a stale resourceVersion now
    assert caught.value.status == 409


async def test_the_status_subresource_keeps_the_spec_and_the_object_keeps_its_status(
        core: kubernetes.client.CoreV1Api) -> None:
    """As the real apiserver does for pods (e2e/test_contract.py): /status takes the status and the labels, never
    the spec; a write to the pod itself leaves its status alone."""
    await call(core.create_namespaced_pod, "ns", pod("p", a="1"))
    await call(core.patch_namespaced_pod_status, "p", "ns",
               {"metadata": {"labels": {"a": "2"}}, "status": {"phase": "Running"},
                "spec": {"containers": [{"name": "c", "image": "sneaky"}]}})
    await call(core.patch_namespaced_pod, "p", "ns", {"status": {"phase": "Failed"}})
    read = await call(core.read_namespaced_pod, "p", "ns")
    assert read.status.phase == "Running" and read.metadata.labels == {"a": "2"}
    assert read.spec.containers[0].image == "i"


async def test_label_and_field_selectors(core: kubernetes.client.CoreV1Api) -> None:
    for name, labels in (("a", {"app": "x", "tier": "gpu"}), ("b", {"app": "x"}), ("c", {"app": "y"})):
        await call(core.create_namespaced_pod, "ns", pod(name, **labels))
    await call(core.create_namespaced_pod, "other", pod("d", app="x"))

    async def names(namespace: str | None = "ns", **kwargs: Any) -> list[str]:
        if namespace is None:
            found = await call(core.list_pod_for_all_namespaces, **kwargs)
        else:
            found = await call(core.list_namespaced_pod, namespace, **kwargs)
        return [item.metadata.name for item in found.items]

    assert await names(label_selector="app=x") == ["a", "b"]
    assert await names(label_selector="app=x,tier=gpu") == ["a"]
    assert await names(label_selector="app!=x") == ["c"]
    assert await names(label_selector="app in (x, y),!tier") == ["b", "c"]
    assert await names(field_selector="metadata.name=c") == ["c"]
    assert await names(None, label_selector="app=x") == ["a", "b", "d"]


async def test_server_version_with_the_trailing_slash(core: kubernetes.client.CoreV1Api) -> None:
    version = await call(kubernetes.client.VersionApi(core.api_client).get_code)
    assert version.major == "1"


async def test_an_injected_error_changes_nothing(world: World, core: kubernetes.client.CoreV1Api) -> None:
    await call(core.create_namespaced_pod, "ns", pod("p", a="1"))
    world.kube["update", PODS] << fail_first(1, 500)
    with pytest.raises(ApiException):
        await call(core.patch_namespaced_pod, "p", "ns", {"metadata": {"labels": {"a": "2"}}})
    read = await call(core.read_namespaced_pod, "p", "ns")
    assert read.metadata.labels == {"a": "1"}


async def test_a_selector_watch_sees_an_object_leave_as_deleted(world: World) -> None:
    kube: KubeEmulator = world.kube
    kube.apply("/v1/pods", {"metadata": {"name": "p", "namespace": "ns", "labels": {"app": "x"}}})
    since = kube.version
    kube.merge("/v1/pods", "ns", "p", {"metadata": {"labels": {"app": "y"}}})
    assert world.server is not None
    response = await world.server.client.get(
        "/api/v1/namespaces/ns/pods", params={"watch": "true", "labelSelector": "app=x",
                                              "resourceVersion": str(since), "timeoutSeconds": "1"})
    lines = [line for line in (await response.text()).splitlines() if line.strip()]
    assert len(lines) == 1 and '"type": "DELETED"' in lines[0]


async def test_a_compacted_resource_version_is_410_gone(world: World) -> None:
    world.kube.apply("/v1/pods", {"metadata": {"name": "p", "namespace": "ns"}})
    world.kube.history.clear()
    world.kube.apply("/v1/pods", {"metadata": {"name": "q", "namespace": "ns"}})
    assert world.server is not None
    response = await world.server.client.get("/api/v1/namespaces/ns/pods",
                                             params={"watch": "true", "resourceVersion": "1"})
    text = await response.text()
    assert '"code": 410' in text and '"type": "ERROR"' in text
