"""The emulator keeps its place in the fast suite and the demo by agreeing with the real apiserver: each case here
sends the same requests to both (a namespace of its own on each) and compares what comes back, reduced to what
cutover relies on: status codes and reasons, resourceVersions that move, namespaces from the URL, selectors,
watch events, Lease conflicts. Where they disagree, the emulator (src/cutover/demo/kube.py) is what changes.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import threading
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest

from cutover.demo.world import World
from tier.cluster import Tier
from tier.controlplane import APISERVER_IP

Observation = Any
Case = Callable[[httpx.Client, str], Observation]
_names = itertools.count(1)


@pytest.fixture(scope="module")
def emulator() -> Iterator[httpx.Client]:
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    world = World()
    asyncio.run_coroutine_threadsafe(world.__aenter__(), loop).result(30)
    try:
        with httpx.Client(base_url=world.url, headers={"Authorization": "Bearer sim-token"}, timeout=10) as client:
            yield client
    finally:
        asyncio.run_coroutine_threadsafe(world.__aexit__(None, None, None), loop).result(30)
        loop.call_soon_threadsafe(loop.stop)


@pytest.fixture(scope="module")
def real(tier: Tier) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=f"https://{APISERVER_IP}", verify=tier.plane.pki.client_context(),
                      timeout=10) as client:
        yield client


def namespace(client: httpx.Client) -> str:
    name = f"contract-{next(_names)}"
    client.post("/api/v1/namespaces", json={"metadata": {"name": name}})
    return name


def config_map(name: str, **labels: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "labels": labels},
            "data": {"k": "v"}}


def failure(answer: httpx.Response) -> tuple[int, str | None]:
    body = answer.json()
    return answer.status_code, body.get("reason") if body.get("kind") == "Status" else None


# --- the cases: each returns what must be equal on both sides --------------------------------------------------

def create_then_conflict(client: httpx.Client, ns: str) -> Observation:
    first = client.post(f"/api/v1/namespaces/{ns}/configmaps", json=config_map("a"))
    meta = first.json()["metadata"]
    again = client.post(f"/api/v1/namespaces/{ns}/configmaps", json=config_map("a"))
    return (first.status_code, meta["namespace"] == ns, bool(meta.get("uid")), meta["resourceVersion"].isdigit(),
            bool(meta.get("creationTimestamp")), failure(again))


def missing_is_not_found(client: httpx.Client, ns: str) -> Observation:
    return failure(client.get(f"/api/v1/namespaces/{ns}/configmaps/nothing-here"))


def label_and_field_selectors(client: httpx.Client, ns: str) -> Observation:
    for name, app in (("x1", "x"), ("x2", "x"), ("y1", "y")):
        client.post(f"/api/v1/namespaces/{ns}/configmaps", json=config_map(name, app=app))
    by_label = client.get(f"/api/v1/namespaces/{ns}/configmaps", params={"labelSelector": "app=x"}).json()
    by_set = client.get(f"/api/v1/namespaces/{ns}/configmaps", params={"labelSelector": "app in (y),app!=x"}).json()
    by_field = client.get(f"/api/v1/namespaces/{ns}/configmaps",
                          params={"fieldSelector": "metadata.name=y1"}).json()
    return ([i["metadata"]["name"] for i in by_label["items"]], [i["metadata"]["name"] for i in by_set["items"]],
            [i["metadata"]["name"] for i in by_field["items"]], by_label["metadata"]["resourceVersion"].isdigit())


def merge_patch_moves_the_version(client: httpx.Client, ns: str) -> Observation:
    made = client.post(f"/api/v1/namespaces/{ns}/configmaps", json=config_map("p", a="1")).json()
    patched = client.patch(f"/api/v1/namespaces/{ns}/configmaps/p", content=json.dumps(
        {"metadata": {"labels": {"b": "2"}}}), headers={"Content-Type": "application/merge-patch+json"})
    body = patched.json()
    return (patched.status_code, body["metadata"]["labels"],
            int(body["metadata"]["resourceVersion"]) > int(made["metadata"]["resourceVersion"]),
            body["metadata"]["uid"] == made["metadata"]["uid"])


def put_with_a_stale_version_conflicts(client: httpx.Client, ns: str) -> Observation:
    made = client.post(f"/api/v1/namespaces/{ns}/configmaps", json=config_map("s")).json()
    client.patch(f"/api/v1/namespaces/{ns}/configmaps/s", content=json.dumps({"data": {"k": "w"}}),
                 headers={"Content-Type": "application/merge-patch+json"})
    made["data"] = {"k": "stale"}
    stale = client.put(f"/api/v1/namespaces/{ns}/configmaps/s", json=made)
    return failure(stale)


def lease_compare_and_swap(client: httpx.Client, ns: str) -> Observation:
    path = f"/apis/coordination.k8s.io/v1/namespaces/{ns}/leases"
    lease = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": {"name": "cutover-svc"},
             "spec": {"holderIdentity": "a", "leaseDurationSeconds": 60}}
    made = client.post(path, json=lease)
    taken = made.json()
    taken["spec"]["holderIdentity"] = "b"
    first = client.put(f"{path}/cutover-svc", json=taken)
    second = client.put(f"{path}/cutover-svc", json=taken)  # the same, now stale, version
    return made.status_code, first.status_code, first.json()["spec"]["holderIdentity"], failure(second), \
        failure(client.post(path, json=lease))


def watch_from_a_version(client: httpx.Client, ns: str) -> Observation:
    listed = client.get(f"/api/v1/namespaces/{ns}/configmaps").json()["metadata"]["resourceVersion"]
    client.post(f"/api/v1/namespaces/{ns}/configmaps", json=config_map("w1", app="w"))
    client.post(f"/api/v1/namespaces/{ns}/configmaps", json=config_map("w2", app="other"))
    answer = client.get(f"/api/v1/namespaces/{ns}/configmaps",
                        params={"watch": "true", "resourceVersion": listed, "labelSelector": "app=w",
                                "timeoutSeconds": "1"}, timeout=10)
    events = [json.loads(line) for line in answer.text.splitlines() if line.strip()]
    return answer.status_code, [(e["type"], e["object"]["metadata"]["name"]) for e in events]


def events_are_created(client: httpx.Client, ns: str) -> Observation:
    event = {"apiVersion": "v1", "kind": "Event", "metadata": {"generateName": "reasoning-long-predictor."},
             "involvedObject": {"kind": "Service", "namespace": ns, "name": "reasoning-long-predictor"},
             "reason": "CutoverStarted", "message": "m", "type": "Normal", "source": {"component": "cutover"}}
    made = client.post(f"/api/v1/namespaces/{ns}/events", json=event)
    return made.status_code, made.json()["metadata"]["name"].startswith("reasoning-long-predictor.")


def a_service_gets_a_cluster_ip(client: httpx.Client, ns: str) -> Observation:
    service = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "svc"},
               "spec": {"selector": {"app": "a"}, "ports": [{"port": 80, "targetPort": 8080}]}}
    made = client.post(f"/api/v1/namespaces/{ns}/services", json=service)
    spec = made.json()["spec"]
    patched = client.patch(f"/api/v1/namespaces/{ns}/services/svc", content=json.dumps(
        {"spec": {"selector": {"app": "b"}}}), headers={"Content-Type": "application/merge-patch+json"}).json()
    return (made.status_code, bool(spec.get("clusterIP")), patched["spec"]["clusterIP"] == spec.get("clusterIP"),
            patched["spec"]["selector"], patched["metadata"]["uid"] == made.json()["metadata"]["uid"])


def status_changes_only_through_status(client: httpx.Client, ns: str) -> Observation:
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "labels": {"a": "1"}},
           "spec": {"nodeName": "no-such-node", "containers": [{"name": "c", "image": "i"}]}}
    client.post(f"/api/v1/namespaces/{ns}/pods", json=pod)
    merge = {"Content-Type": "application/merge-patch+json"}
    via_status = client.patch(f"/api/v1/namespaces/{ns}/pods/p/status", content=json.dumps(
        {"metadata": {"labels": {"a": "2"}}, "status": {"phase": "Running"}}), headers=merge).json()
    via_main = client.patch(f"/api/v1/namespaces/{ns}/pods/p", content=json.dumps(
        {"status": {"phase": "Failed"}}), headers=merge).json()
    return via_status["metadata"]["labels"], via_status["status"]["phase"], via_main["status"]["phase"]


def an_unknown_resource_is_not_found(client: httpx.Client, ns: str) -> Observation:
    return client.get(f"/apis/nothing.example.invalid/v1/namespaces/{ns}/things").status_code


def version_answers(client: httpx.Client, ns: str) -> Observation:
    answer = client.get("/version")
    return answer.status_code, sorted(k for k in answer.json() if k in ("major", "minor", "gitVersion"))


CASES: list[Case] = [create_then_conflict, missing_is_not_found, label_and_field_selectors,
                     merge_patch_moves_the_version, put_with_a_stale_version_conflicts, lease_compare_and_swap,
                     watch_from_a_version, events_are_created, version_answers,
                     a_service_gets_a_cluster_ip, status_changes_only_through_status,
                     an_unknown_resource_is_not_found]


@pytest.mark.parametrize("case", CASES, ids=[c.__name__ for c in CASES])
def test_the_emulator_answers_as_the_real_apiserver(case: Case, real: httpx.Client, emulator: httpx.Client) -> None:
    want = case(real, namespace(real))
    got = case(emulator, namespace(emulator))
    assert got == want
