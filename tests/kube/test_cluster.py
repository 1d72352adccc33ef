"""Cluster reads through the official client against the emulated API server over HTTP: through a
kubeconfig and through the in-cluster path (HTTPS, token), with selectors, watches that resume,
410 Gone, and API errors retried."""

from __future__ import annotations

import asyncio
import contextlib
import io
import json
import socket
import ssl
import threading
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, cast

import pytest
import structlog
import trustme

from cutover import logs
from cutover.core.views import ServiceView
from cutover.demo.world import BACKENDS, NAMESPACE, SERVICE, Script, World
from cutover.errors import ClusterError, ClusterUnavailable, InvalidInput
from cutover.flows import context
from cutover.flows.context import Run
from cutover.kube import cluster
from helpers import PODS, fail_first, kubeconfig_at, named, requests


async def test_pods_by_selector_service_slices_and_policies(world: World, kube: cluster.Cluster) -> None:
    serving = world.add_pod("vllm", ready=True)
    world.add_pod("candle", Script(pull=3600))
    await world.settled()
    pods, version = await kube.pods(NAMESPACE, BACKENDS["vllm"]["labels"])
    assert [pod.name for pod in pods] == [serving.name] and int(version) > 0
    assert pods[0].ready and pods[0].ip == serving.ip
    assert pods[0].containers[0].startup_probe is not None and pods[0].containers[0].startup_probe.budget == 1800
    service = await kube.service(NAMESPACE, SERVICE)
    assert service.cluster_ip == world.cluster_ip and [p.port for p in service.ports] == [80, 8080]
    assert service.selector == BACKENDS["vllm"]["labels"]
    endpoints = await kube.endpoints(NAMESPACE, SERVICE)
    assert [(e.ip, e.ready, e.pod_name) for e in endpoints] == [(serving.ip, True, serving.name)]
    policies = await kube.network_policies(NAMESPACE)
    assert {p.name for p in policies} == {"llm-serving-ingress", "llm-serving-ingress-cutover"}
    (listing,) = requests(world, watch=False)
    assert listing.params["labelSelector"] == ("app.kubernetes.io/name=llm-reasoning,component=predictor,"
                                               "serving.kserve.io/inferenceservice=reasoning")


async def test_an_event_is_redacted_like_a_log_line(world: World, kube: cluster.Cluster) -> None:
    """Events leave the process beside structlog, not through it: they meet the same redactor."""
    secret = "an-event-secret-value-that-is-long"
    logs.configure(fmt="json", stream=io.StringIO(), secrets=[secret])
    try:
        service = ServiceView(NAMESPACE, SERVICE, "uid-1", "10.0.0.1", {}, ())
        await kube.record_event(service, reason="CutoverFailed", at=datetime.now(UTC),
                                message=f"git said: token {secret} refused; and ghp_{'x' * 36}")
    finally:
        structlog.reset_defaults()
    (event,) = world.kube.objects("/v1/events", NAMESPACE)
    assert secret not in event["message"] and "ghp_" not in event["message"]
    assert event["message"].count("[REDACTED]") == 2


async def test_in_cluster_over_https_with_the_service_account_token(tmp_path: Path) -> None:
    authority = trustme.CA()
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    authority.issue_cert("127.0.0.1").configure_cert(context)
    async with World(ssl_context=context) as world:
        world.add_pod("vllm", ready=True)
        await world.settled()
        account = tmp_path / "serviceaccount"
        account.mkdir()
        (account / "token").write_text("in-cluster-token-0123456789")
        authority.cert_pem.write_to_path(str(account / "ca.crt"))
        (account / "namespace").write_text("cutover\n")
        assert world.server is not None
        environ = {"KUBERNETES_SERVICE_HOST": "127.0.0.1", "KUBERNETES_SERVICE_PORT": str(world.server.port)}
        kube = cluster.connect(incluster_dir=account, environ=environ)
        try:
            assert kube.own_namespace == "cutover"
            pods, _ = await kube.pods(NAMESPACE, BACKENDS["vllm"]["labels"])
            assert len(pods) == 1
            (account / "token").write_text("rotated-token-9876543210")  # the kubelet rotates a bound token in place
            await kube.pods(NAMESPACE, BACKENDS["vllm"]["labels"])
            (account / "token").write_text("in-cluster-token-0123456789")
            async with kube.watch_pods(NAMESPACE, BACKENDS["vllm"]["labels"]) as watch:
                await watch.synced.wait()
                world.add_pod("vllm")
                while len(watch.pods) < 2:
                    await watch.changed(5)
        finally:
            await kube.aclose()
        seen = {r.headers.get("Authorization", "").lower() for r in world.kube if r.url.path.endswith("/pods")}
        assert seen == {"bearer in-cluster-token-0123456789", "bearer rotated-token-9876543210"}  # read afresh
        assert len(requests(world, watch=True)) == 1


async def test_no_configuration_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(ClusterError) as caught:
        cluster.connect(environ={"KUBECONFIG": str(tmp_path / "missing"), "HOME": str(tmp_path)})
    assert caught.value.cause == "cluster_config" and "KUBECONFIG" in caught.value.hint


async def test_a_kubeconfig_flag_naming_no_file_names_the_flag_and_the_path(tmp_path: Path) -> None:
    with pytest.raises(InvalidInput) as caught:
        cluster.connect(kubeconfig=str(tmp_path / "missing"), environ={})
    assert caught.value.exit_code == 2 and caught.value.message.startswith("--kubeconfig: expected a kubeconfig")
    assert str(tmp_path / "missing") in caught.value.message


@pytest.mark.looptime
async def test_a_watch_resumes_from_its_last_version_without_relisting(world: World,
                                                                      kube: cluster.Cluster) -> None:
    labels = BACKENDS["candle"]["labels"]
    async with kube.watch_pods(NAMESPACE, labels) as watch:
        await watch.synced.wait()
        pod = world.add_pod("candle", Script(pull=10, load=1000))
        while not any(p.ready for p in watch.pods.values()):
            await watch.changed(None)
    watches = requests(world, watch=True)
    assert len(requests(world, watch=False)) == 1  # one list, then only watches
    assert len(watches) == 4  # 1015 s of startup over 290 s watches
    assert all(w.params["timeoutSeconds"] == str(cluster.WATCH_SECONDS) for w in watches)
    versions = [int(w.params["resourceVersion"]) for w in watches]
    assert versions == sorted(versions) and len(set(versions)) >= 2
    assert pod.name in watch.pods


@pytest.mark.looptime
async def test_410_gone_relists_and_the_view_catches_up(world: World, kube: cluster.Cluster) -> None:
    labels = BACKENDS["candle"]["labels"]
    async with kube.watch_pods(NAMESPACE, labels) as watch:
        await watch.synced.wait()
        first = world.add_pod("candle", Script(pull=5, load=100_000))
        await watch.changed(None)
        world.kube.history.clear()  # compaction: the next resume finds its version gone
        world.kube.apply("/v1/configmaps", {"metadata": {"name": "bump", "namespace": "x"}})
        second = world.add_pod("candle", Script(pull=5, load=100_000))
        while second.name not in watch.pods:
            await watch.changed(None)
        assert set(watch.pods) == {first.name, second.name}
    assert len(requests(world, watch=False)) == 2  # the initial list and the re-list after 410


@pytest.mark.looptime
async def test_api_errors_are_retried_with_backoff(world: World, kube: cluster.Cluster,
                                                   events: list[dict[str, Any]]) -> None:
    world.kube["list", PODS] << fail_first(2, 503)
    world.add_pod("vllm", ready=True)
    pods, _ = await kube.pods(NAMESPACE, BACKENDS["vllm"]["labels"])
    assert len(pods) == 1
    retries = [e for e in events if e["event"] == "cluster.retry"]
    assert [e["attempt"] for e in retries] == [1, 2]
    assert "503" in retries[0]["error"]


@pytest.mark.looptime
async def test_an_unreachable_api_gives_up_after_six_attempts(tmp_path: Path, events: list[dict[str, Any]]) -> None:
    config = tmp_path / "kubeconfig"
    config.write_text(json.dumps({
        "apiVersion": "v1", "kind": "Config", "current-context": "x",
        "clusters": [{"name": "x", "cluster": {"server": "http://127.0.0.1:9"}}],  # nothing listens on port 9
        "users": [{"name": "x", "user": {"token": "t"}}],
        "contexts": [{"name": "x", "context": {"cluster": "x", "user": "x"}}]}))
    kube = cluster.connect(kubeconfig=str(config), environ={})
    try:
        with pytest.raises(ClusterUnavailable) as caught:
            await kube.pods(NAMESPACE, {"a": "b"})
    finally:
        await kube.aclose()
    assert caught.value.cause == "cluster_api_unavailable" and "egress" in caught.value.hint
    assert [e["attempt"] for e in events if e["event"] == "cluster.retry"] == [1, 2, 3, 4, 5]


@pytest.mark.looptime
async def test_a_permanent_error_is_not_retried(world: World, kube: cluster.Cluster) -> None:
    world.kube["list", PODS] << fail_first(1, 403)
    with pytest.raises(ClusterError) as caught:
        await kube.pods(NAMESPACE, BACKENDS["vllm"]["labels"])
    assert caught.value.cause == "cluster_forbidden" and "Role" in caught.value.hint
    assert len(requests(world, watch=False)) == 1


@pytest.mark.looptime
async def test_a_refusal_right_after_an_outage_is_retried(world: World, kube: cluster.Cluster) -> None:
    """An apiserver back from a restart refuses what RBAC allows until its caches sync (kubernetes#121635):
    a 403 that follows an outage is tried again, one on its own is not (the test above)."""
    world.kube["list", PODS] << fail_first(1, 503)
    world.kube["list", PODS] << fail_first(1, 403)
    world.add_pod("vllm", ready=True)
    pods, _ = await kube.pods(NAMESPACE, BACKENDS["vllm"]["labels"])
    assert len(pods) == 1
    assert len(requests(world, watch=False)) == 3


@pytest.mark.looptime
async def test_a_watch_refused_after_an_outage_resumes(world: World, kube: cluster.Cluster) -> None:
    world.kube["watch", PODS] << fail_first(1, 500)
    world.kube["watch", PODS] << fail_first(1, 403)
    async with kube.watch_pods(NAMESPACE, BACKENDS["candle"]["labels"]) as watch:
        await watch.synced.wait()
        pod = world.add_pod("candle", Script(pull=5, load=100_000))
        while pod.name not in watch.pods:
            await watch.changed(None)
        watch.raise_if_failed()
    assert len(requests(world, watch=True)) >= 3


async def test_a_cancel_that_lands_as_the_pods_change_is_kept(world: World, kube: cluster.Cluster) -> None:
    """A SIGTERM cancels the wait as a pod update arrives: the wait must end, not go on with the Lease held
    (3.11's wait_for dropped exactly this cancel, python/cpython#86296; the CLI's SIGTERM test met it under load)."""
    world.add_pod("candle", Script(pull=3600))
    watch = cluster.PodWatch(kube, NAMESPACE, BACKENDS["candle"]["labels"])
    waiter = asyncio.create_task(watch.changed(60))
    await asyncio.sleep(0)  # the wait has begun
    await watch.relist()  # a change: the waiter is woken, but has not run yet
    assert waiter.cancel()  # the cancel is accepted, so it must be delivered
    with pytest.raises(asyncio.CancelledError):
        await waiter


@pytest.mark.looptime
async def test_a_dropped_watch_reconnects(world: World, kube: cluster.Cluster) -> None:
    world.kube["watch", PODS] << fail_first(1, 500)
    async with kube.watch_pods(NAMESPACE, BACKENDS["candle"]["labels"]) as watch:
        await watch.synced.wait()
        pod = world.add_pod("candle", Script(pull=5, load=100_000))
        while pod.name not in watch.pods:
            await watch.changed(None)
    assert len(requests(world, watch=True)) >= 2


def test_an_event_that_hangs_never_holds_the_exit(tmp_path: Path) -> None:
    """docs/guarantees.md #7: `asyncio.run` joins the default executor's threads as it ends, so an Event stuck there
    held the exit for a whole read timeout. An Event runs in a daemon thread that nobody joins instead."""
    listener = socket.create_server(("127.0.0.1", 0))  # accepts (the kernel's backlog) and never answers
    config = tmp_path / "kubeconfig"
    config.write_text(json.dumps({
        "apiVersion": "v1", "kind": "Config", "current-context": "mute",
        "clusters": [{"name": "mute", "cluster": {"server": f"http://127.0.0.1:{listener.getsockname()[1]}"}}],
        "users": [{"name": "mute", "user": {"token": "t"}}],
        "contexts": [{"name": "mute", "context": {"cluster": "mute", "user": "mute", "namespace": "cutover"}}]}))
    kube = cluster.connect(kubeconfig=str(config))
    service = ServiceView("llm-serving", "svc", "uid-1", "10.0.0.1", {"a": "b"}, ())

    async def main() -> None:
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(0):  # the side effect's budget, already spent: cancelled at its first await
                await kube.record_event(service, reason="CutoverCommitted", message="m", at=datetime.now(UTC))

    try:
        asyncio.run(main())
        stuck = [thread for thread in threading.enumerate() if thread.name == "cutover-request"]
        assert stuck and all(thread.daemon and thread.is_alive() for thread in stuck)  # left behind, not joined
    finally:
        listener.close()


@pytest.mark.looptime
async def test_a_silent_events_api_holds_the_run_once_and_is_asked_once(tmp_path: Path, make_plan: Any,
                                                                         events: list[dict[str, Any]],
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """The newcomer's review: with the Events API silent, `cutover syncfail` ended 8 s later than without (the write
    retried after its read timeout, and the next Event waited again). Now one try per Event, and the first Event
    whose budget ran out mutes the run's others: the exit is held once, within the 5 s promised."""
    listener = socket.create_server(("127.0.0.1", 0))
    accepted: list[socket.socket] = []

    def accept() -> None:
        with contextlib.suppress(OSError):
            while True:
                accepted.append(listener.accept()[0])  # accepted, never answered

    threading.Thread(target=accept, daemon=True).start()
    kube = cluster.connect(kubeconfig=str(kubeconfig_at(tmp_path / "kubeconfig",
                                                        f"http://127.0.0.1:{listener.getsockname()[1]}")))
    monkeypatch.setattr(context, "SIDE_EFFECT_BUDGET", 0.05)  # its 5 s spent at once: no wall-clock wait here
    run = Run.create(kube, make_plan(), cast(Any, None))
    service = ServiceView("llm-serving", "svc", "uid-1", "10.0.0.1", {"a": "b"}, ())
    try:
        for reason in ("CutoverSyncFailed", "CutoverRolledBack", "CutoverHeld"):
            await run.event(service, reason, "m")
    finally:
        listener.close()
        for connection in accepted:
            connection.close()
        kube.close()
    assert run.muted == ["CutoverSyncFailed"] and len(named(events, "event.failed")) == 1
    assert len(accepted) <= 1  # asked once, never again after it fell silent


@pytest.mark.looptime
async def test_an_unreachable_api_server_is_named(tmp_path: Path) -> None:
    config = kubeconfig_at(tmp_path / "kubeconfig", "https://127.0.0.1:9")  # the discard port: refused
    kube = cluster.connect(kubeconfig=str(config))
    try:
        with pytest.raises(ClusterUnavailable) as caught:
            await kube.service("llm-serving", "svc")
    finally:
        await kube.aclose()
    assert "Kubernetes API at https://127.0.0.1:9 unreachable" in caught.value.message
    assert "--kubeconfig" in caught.value.hint


@pytest.mark.parametrize(("text", "words"), [
    ("clusters: [oops\n", "expected a kubeconfig (YAML with clusters, users and contexts)"),
    ("- just\n- a list\n", "expected a kubeconfig"),
])
async def test_a_kubeconfig_that_is_not_one_is_a_named_input_error(tmp_path: Path, text: str, words: str) -> None:
    """A malformed kubeconfig once ended as "internal error ... this is a bug"."""
    config = tmp_path / "kubeconfig"
    config.write_text(text)
    with pytest.raises(InvalidInput) as caught:
        cluster.connect(kubeconfig=str(config), environ={})
    assert caught.value.exit_code == 2 and str(config) in caught.value.message and words in caught.value.message


async def test_an_unknown_context_is_named_with_the_ones_there_are(tmp_path: Path) -> None:
    """It once hinted "set KUBECONFIG", which was set."""
    config = tmp_path / "kubeconfig"
    config.write_text(json.dumps({
        "apiVersion": "v1", "kind": "Config", "current-context": "prod",
        "clusters": [{"name": "x", "cluster": {"server": "https://127.0.0.1:9"}}],
        "users": [{"name": "x", "user": {"token": "t"}}],
        "contexts": [{"name": "prod", "context": {"cluster": "x", "user": "x"}},
                     {"name": "staging", "context": {"cluster": "x", "user": "x"}}]}))
    with pytest.raises(InvalidInput) as caught:
        cluster.connect(kubeconfig=str(config), context="dev", environ={})
    assert caught.value.exit_code == 2
    assert caught.value.message.startswith("--context: expected one of prod, staging")
    assert "'dev'" in caught.value.message
    assert "KUBECONFIG" not in caught.value.hint
