"""Drain safety (docs/capacity.md): what deleting the backend a switch leaves would cut, read from its pods' spec."""

from __future__ import annotations

from typing import Any

import pytest

from cutover.engines import shutdown
from cutover.kube import payloads


def vllm_pod(*, args: list[str], grace: int | None = None, pre_stop: dict[str, Any] | None = None) -> Any:
    container: dict[str, Any] = {"name": "vllm", "args": args}
    if pre_stop is not None:
        container["lifecycle"] = {"preStop": pre_stop}
    spec: dict[str, Any] = {"containers": [container]}
    if grace is not None:
        spec["terminationGracePeriodSeconds"] = grace
    return payloads.pod_view({"metadata": {"name": "vllm-0"}, "spec": spec})


@pytest.mark.parametrize(("why", "pod", "words"), [
    ("no --shutdown-timeout", vllm_pod(args=["--model", "/m"]), "without --shutdown-timeout"),
    ("--shutdown-timeout 0", vllm_pod(args=["--shutdown-timeout", "0"]), "without --shutdown-timeout"),
    ("a grace period shorter than the timeout", vllm_pod(args=["--shutdown-timeout=60"]),
     "terminationGracePeriodSeconds (30s) is below its preStop sleep plus --shutdown-timeout (60s)"),
    ("a preStop sleep on top", vllm_pod(args=["--shutdown-timeout", "60"], grace=65,
                                        pre_stop={"sleep": {"seconds": 10}}), "(70s)"),
    ("a preStop exec sleep in a shell line", vllm_pod(args=["--shutdown-timeout", "60"], grace=65,
                                                      pre_stop={"exec": {"command": ["/bin/sh", "-c",
                                                                                     "echo bye; sleep 15"]}}),
     "(75s)"),
])
def test_a_vllm_that_would_cut_its_streams_is_named(why: str, pod: Any, words: str) -> None:
    (warning,) = shutdown.warnings("vllm", "vllm", [pod])
    assert warning.startswith("vllm: vllm-0") and words in warning


def test_a_vllm_that_drains_within_its_grace_is_quiet() -> None:
    pod = vllm_pod(args=["--shutdown-timeout", "120"], grace=140, pre_stop={"sleep": {"seconds": 15}})
    assert shutdown.warnings("vllm", "vllm", [pod]) == []
    shell = payloads.pod_view({"metadata": {"name": "v"}, "spec": {"terminationGracePeriodSeconds": 90, "containers": [
        {"name": "vllm", "command": ["/bin/sh", "-c", "exec vllm serve /m --shutdown-timeout 60"]}]}})
    assert shutdown.warnings("vllm", "vllm", [shell]) == []


def test_candle_vllm_always_cuts_and_other_engines_are_not_judged() -> None:
    pod = vllm_pod(args=[])
    (warning,) = shutdown.warnings("candle", "candle-vllm", [pod])
    assert "no graceful shutdown and no /metrics" in warning
    assert shutdown.warnings("sg", "sglang", [pod]) == []
    assert shutdown.warnings("vllm", "vllm", []) == []
