"""What ArgoCD's own Application page says of a cutover: ArgoCD 3.5's per-Application notice, the annotations
`notice.argocd.argoproj.io/content` and `/severity` (docs/user-guide/application-notice.md of argo-cd; older
versions ignore them). One line: where a run stands (the milestone's stage, the move, how long a wait has spent and
has left), then how it ended (the outcome line's words). Pure: the cluster adapter writes what this says.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from cutover.core import milestones

CONTENT = "notice.argocd.argoproj.io/content"
SEVERITY = "notice.argocd.argoproj.io/severity"
LIMIT = 500  # characters ArgoCD shows of the content
FAILURES = frozenset({milestones.FAILED, milestones.FAILED_FAST, milestones.BUDGET_EXHAUSTED, milestones.NAMES_FAILED})
WARNINGS = frozenset({milestones.ROLLED_BACK, milestones.HELD})


def of(event: Mapping[str, Any]) -> tuple[str, str] | None:
    """(content, severity) for a milestone event; None for any other event."""
    name = str(event.get("event"))
    stage = milestones.STAGES.get(name)
    if stage is None:
        return None
    parts = [f"cutover {event.get('cutover') or event.get('service') or ''}: {stage}".replace(" :", ":")]
    target = event.get("to") or event.get("backend") or event.get("on")
    if name == milestones.WAITING:
        parts.append(f"{target}: {event.get('ready', 0)} pod(s) Ready, {event.get('elapsed', 0)}s spent, "
                     f"{event.get('budget_left', 0)}s left")
    elif name == milestones.HELD:
        parts.append(f"on {target}")
    elif target:
        parts.append(f"{event.get('source') or event.get('from') or ''} → {target}".lstrip())
    if event.get("commit"):
        parts.append(f"commit {str(event['commit'])[:12]}")
    if event.get("cause"):
        parts.append(f"{event['cause']}: {event.get('message', '')}")
    severity = "critical" if name in FAILURES else "warning" if name in WARNINGS else "info"
    return clip("; ".join(parts)), severity


def ended(plan: str, command: str, *, ok: bool, said: str) -> tuple[str, str]:
    """How the run ended, as its outcome line says it: the notice it leaves. A SyncFail that did its part still
    reports a failed sync: a warning."""
    severity = "critical" if not ok else "warning" if command == "syncfail" else "info"
    return clip(f"cutover {plan} ({command}): {'OK' if ok else 'FAILED'} — {said}"), severity


def clip(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= LIMIT else text[: LIMIT - 1] + "…"


def as_annotations(found: tuple[str, str]) -> dict[str, str]:
    content, severity = found
    return {CONTENT: content, SEVERITY: severity}
