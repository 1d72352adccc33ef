"""Logging: JSON lines off a TTY, and secrets redacted from every value, message and traceback."""

from __future__ import annotations

import io
import json
import sys
from pathlib import Path

import pytest
import structlog

import cutover
from cutover import logs
from cutover.cli import main
from plans import GOOD

SECRET = "s3cr3t-webhook-value-1234"


@pytest.fixture(autouse=True)
def _reset_structlog() -> object:
    yield
    structlog.reset_defaults()


@pytest.mark.parametrize("text", [
    "ghp_" + "a" * 36,
    "github_pat_" + "B" * 40,
    "glpat-" + "c" * 20,
    "xoxb-1234567890-abcdefghij",
    "https://hooks.slack.com/services/T000/B000/XXXXXXXXXXXXXXXX",
    "eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJzeXN0ZW0ifQ.c2lnbmF0dXJl",
    "Authorization: Bearer abcdefghijklmnop",
    "https://bot:hunter2hunter2@github.com/acme/gitops.git",
])
def test_token_shapes_are_redacted_without_being_configured(text: str) -> None:
    scrubbed = logs.Redactor().scrub_text(f"before {text} after")
    assert logs.REDACTED in scrubbed and "before" in scrubbed and "after" in scrubbed
    assert text.rsplit(maxsplit=1)[-1].split("@", maxsplit=1)[0].rsplit(":", maxsplit=1)[-1] not in scrubbed


def test_ordinary_text_is_left_alone() -> None:
    text = "pod reasoning-long-predictor-candle-00001 proven at 10.0.0.1:8080 in 0.2s"
    assert logs.Redactor([SECRET, "short"]).scrub_text(text) == text


def test_json_lines_off_a_tty_with_every_value_scrubbed() -> None:
    out = io.StringIO()
    logs.configure(fmt=None, secrets=[SECRET], stream=out)
    log = structlog.get_logger("cutover")
    log.info("git.committed", url=f"https://x/{SECRET}", nested={"list": [SECRET, 1]}, count=3)
    try:
        raise RuntimeError(f"failed with {SECRET}")
    except RuntimeError:
        log.exception("cutover.internal_error")
    lines = [json.loads(line) for line in out.getvalue().splitlines()]
    assert [line["event"] for line in lines] == ["git.committed", "cutover.internal_error"]
    assert lines[0]["nested"] == {"list": [logs.REDACTED, 1]} and lines[0]["count"] == 3
    assert lines[0]["level"] == "info" and lines[0]["timestamp"].endswith("Z")
    assert "RuntimeError: failed with [REDACTED]" in lines[1]["exception"]
    assert SECRET not in out.getvalue()


def test_console_tracebacks_are_scrubbed_too() -> None:
    out = io.StringIO()
    logs.configure(fmt="console", secrets=[SECRET], stream=out)
    try:
        raise RuntimeError(f"failed with {SECRET}")
    except RuntimeError:
        structlog.get_logger().exception("boom")
    assert "failed with [REDACTED]" in out.getvalue() and SECRET not in out.getvalue()


def test_levels_below_the_threshold_are_dropped() -> None:
    out = io.StringIO()
    logs.configure(fmt="json", level="warning", stream=out)
    structlog.get_logger().info("quiet")
    structlog.get_logger().warning("loud")
    assert [json.loads(line)["event"] for line in out.getvalue().splitlines()] == ["loud"]


def test_on_a_terminal_a_failure_is_said_once_and_the_sinks_still_hear_it() -> None:
    """The outcome line ends every command with the cause, message and hint; on a terminal the failure's log
    line said the same again just above it. JSON logs (a pod's) and the sinks (Slack) keep it."""
    heard: list[str] = []

    def sink(logger: object, method: str, event: dict[str, object]) -> dict[str, object]:
        heard.append(str(event["event"]))
        return event

    for fmt, shown in (("console", False), ("json", True)):
        out = io.StringIO()
        logs.configure(fmt=fmt, stream=out, sinks=[sink])
        structlog.get_logger().error("cutover.failed", cause="crash_loop", message="the pod crash-loops")
        structlog.get_logger().warning("target.warming", message="still cold")
        assert ("the pod crash-loops" in out.getvalue()) is shown and "still cold" in out.getvalue()
    assert heard.count("cutover.failed") == 2


def test_the_public_surface_is_small_and_pinned() -> None:
    assert cutover.__all__ == ["CutoverError", "ExitCode", "__version__"]
    assert [code.value for code in cutover.ExitCode] == list(range(9))


class Writes(io.StringIO):
    """A stream that keeps its writes apart, as the reader of a pipe may see them."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: list[str] = []

    def write(self, text: str) -> int:
        self.calls.append(text)
        return super().write(text)


def test_every_line_is_one_write_with_its_newline(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """A pod's stdout and stderr are two pipes, read apart by the container runtime: a line written in two parts (a
    log line, then its newline, as print writes them unbuffered) had the outcome line from the other pipe land
    inside it in a pod's log (the real tier, image mode). Log lines, the `--output json` document and the outcome
    line are each written whole."""
    plan_file = tmp_path / "plan.yaml"
    plan_file.write_text(GOOD)
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "no-kubeconfig"))  # exit 1, cluster_config: logged, then said
    monkeypatch.setenv("CUTOVER_TERMINATION_LOG", str(tmp_path / "termination-log"))
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    out, err = Writes(), Writes()
    monkeypatch.setattr(sys, "stdout", out)
    monkeypatch.setattr(sys, "stderr", err)
    with pytest.raises(SystemExit) as caught:
        main.main(["--log-format", "json", "verify", "--backend", "candle", "--plan", str(plan_file),
                   "--output", "json"])
    assert caught.value.code == 1
    assert json.loads(out.getvalue())["cause"] == "cluster_config"  # the document on stdout
    said = err.getvalue().splitlines()
    assert json.loads(said[0])["event"] and said[-1].startswith("cutover verify: FAILED")  # logs, then the outcome
    for stream in (out, err):
        assert stream.calls and all(call.endswith("\n") for call in stream.calls), stream.calls
