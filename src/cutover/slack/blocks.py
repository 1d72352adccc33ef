"""Block Kit: how a milestone reads in Slack, pure (no I/O).

A message is a header, up to 10 fields and, on failure, the cause and the hint; text from outside is escaped so
it can neither mention nor link, and every mrkdwn text is `verbatim` (Slack links no bare URL or channel name in
it: an engine's answer shows as it came). The transports post what this module builds.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from cutover.core import milestones

PROGRESS = (milestones.WAITING, milestones.WARMING)  # how a wait goes: coalesced, one updated message


@dataclasses.dataclass
class Message:
    key: str  # one thread per cutover: the service and the cutover id when known
    stage: str
    event: dict[str, Any]

    @property
    def progress(self) -> bool:
        return self.event.get("event") in PROGRESS

    @property
    def cluster(self) -> str | None:
        """A fleet's cluster (docs/fleet.md): its messages are one line of the fleet change's thread."""
        found = self.event.get("cluster")
        return str(found) if found and self.event.get("fleet") else None

    @property
    def said(self) -> str:
        """What a re-run saying it again would repeat: the stage of this hop (a path through a bridge proves,
        commits and verifies twice, once per hop: each is news)."""
        hop = self.event.get("hop")
        return f"{self.stage}@{hop}" if hop else self.stage


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def escaped(value: object) -> str:
    """Text from outside (engine answers, pod messages, commit authors) as Slack shows it literally: `&`, `<`
    and `>` escaped, so it can neither mention (`<!channel>`) nor link (`<https://...|...>`)."""
    return str(value).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def blocks(message: Message) -> list[dict[str, Any]]:
    """A header, up to 10 fields and, on failure, the cause and the hint; within Slack's documented limits
    (header text 150, field 2000, section text 3000 characters; at most 50 blocks)."""
    event = message.event
    service = str(event.get("service", "?"))
    move = f"{event.get('source') or event.get('from') or ''} → {event.get('to') or event.get('backend') or ''}"
    fields = [("Stage", message.stage)]
    for key, label in (("cluster", "Cluster"), ("elapsed", "Elapsed (s)"), ("budget_left", "Budget left (s)"),
                       ("pods", "Pods"), ("names", "Names"), ("commit", "Commit"), ("url", "Link"),
                       ("ready", "Ready pods")):
        if event.get(key) not in (None, "", []):
            value = event[key]
            fields.append((label, escaped(", ".join(map(str, value)) if isinstance(value, list) else value)))
    result: list[dict[str, Any]] = [
        {"type": "header", "text": {"type": "plain_text", "text": _clip(escaped(f"cutover {service} {move}".strip()),
                                                                         150)}},
        {"type": "section", "fields": [{"type": "mrkdwn", "text": _clip(f"*{label}*\n{value}", 2000),
                                        "verbatim": True} for label, value in fields[:10]]},
    ]
    if event.get("table"):  # the fitness table, old beside new (docs/fitness.md); a code block keeps its columns
        lines = "\n".join(escaped(line) for line in event["table"])
        result.append({"type": "section", "text": {"type": "mrkdwn", "text": _clip(f"```\n{lines}\n```", 3000),
                                                   "verbatim": True}})
    if event.get("cause"):
        detail = (f"*Cause* `{escaped(event['cause'])}`: {escaped(event.get('message', ''))}\n"
                  f"*Hint* {escaped(event.get('hint', ''))}")
        result.append({"type": "section", "text": {"type": "mrkdwn", "text": _clip(detail, 3000), "verbatim": True}})
    return result[:50]


def text(message: Message) -> str:
    """The plain-text fallback (notifications, screen readers)."""
    return _clip(escaped(f"cutover {message.event.get('service', '')}: {message.stage}"), 3000)


def fleet_head(message: Message) -> tuple[str, list[dict[str, Any]]]:
    """The head of a fleet change's thread (one per commit of the fleet, every cluster's line under it): the Service
    and the revision, what every cluster says alike."""
    event = message.event
    title = escaped(f"cutover fleet {event.get('service', '?')} at {event.get('fleet', '?')}")
    return _clip(title, 3000), [
        {"type": "header", "text": {"type": "plain_text", "text": _clip(title, 150)}},
        {"type": "section", "text": {"type": "mrkdwn", "verbatim": True,
                                     "text": "One line per cluster below, each updated as its sync goes."}}]


def line(message: Message) -> str:
    """A cluster's line in its fleet change's thread: which cluster, what it says now, toward which backend."""
    event = message.event
    to = event.get("to") or event.get("backend") or ""
    return _clip(escaped(f"{message.cluster}: {message.stage}" + (f" ({to})" if to else "")), 3000)


def line_blocks(message: Message) -> list[dict[str, Any]]:
    """The line as Slack shows it, with the fitness table and, on failure, the cause and the hint as in `blocks`."""
    return [{"type": "section", "text": {"type": "mrkdwn", "text": line(message), "verbatim": True}},
            *blocks(message)[2:]]
