"""Faults of Slack: down, rate-limited, hanging; the cutover's outcome never depends on it."""

from __future__ import annotations

from harness import Case, slack_always, slack_down, slack_faults, slack_hangs

CASES = [
    # Slack
    Case("slack", "Slack unreachable", slack_down, slack=True, saw=("slack.dropped",)),
    Case("slack", "Slack 429 with Retry-After", slack_faults((429, {"Retry-After": "3"}), (429, {})), slack=True),
    Case("slack", "Slack 500 twice, then well", slack_faults(*[(500, {})] * 2), slack=True,
         unseen=("slack.circuit_open", "slack.dropped")),
    Case("slack", "Slack 500 for ever: left alone after 3 tries", slack_always(500), slack=True,
         saw=("slack.circuit_open",)),
    Case("slack", "Slack hangs", slack_hangs, slack=True, saw=("slack.unsent", "slack.circuit_open")),
    Case("slack", "webhook with a trailing newline", lambda stage: stage.env.update(
        CUTOVER_SLACK_WEBHOOK=stage.slack.webhook + "\n"), slack=True, unseen=("slack.dropped", "slack.unsent")),
]
