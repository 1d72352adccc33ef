"""The drain's rule (docs/capacity.md): the in-flight gauge read from Prometheus' text format, and a pod idle on its
second read at 0 in a row."""

from __future__ import annotations

import pytest

from cutover.engines import drain

METRICS = """\
# HELP vllm:num_requests_running Number of requests in model execution batches.
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{engine="0",model_name="reasoning"} 2.0
vllm:num_requests_running{engine="1",model_name="reasoning"} 1.0
vllm:num_requests_waiting{engine="0",model_name="reasoning"} 7.0
vllm:num_requests_running_total 99
"""


@pytest.mark.parametrize(("text", "value"), [
    (METRICS, 3.0),  # summed over engine cores; a longer name and the waiting gauge are not it
    ("vllm:num_requests_running 0\n", 0.0),
    ("vllm:num_requests_running{model_name=\"a\"} 1 1733170000000\n", 1.0),  # with a timestamp
    ("# only comments\n", None),
    ("vllm:num_requests_running{model_name=\"a\"} not-a-number\n", None),
    ("", None),
])
def test_the_gauge_in_prometheus_text(text: str, value: float | None) -> None:
    assert drain.gauge(text, "vllm:num_requests_running") == value


def test_a_pod_is_idle_on_its_second_zero_in_a_row() -> None:
    reads = drain.Reads().after("a", 0.0)
    assert not reads.idle(["a"])
    reads = reads.after("a", 0.0)
    assert reads.idle(["a"])
    busy = reads.after("a", 1.0).after("b", None)
    assert not busy.idle(["a", "b"]) and busy.running() == {"a": 1.0}
    assert busy.after("a", 0.0).after("b", None).after("a", 0.0).idle(["a", "b"])  # silent b counts as idle
