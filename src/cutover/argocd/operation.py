"""What a hook can learn about the sync it runs in, and when ArgoCD has applied our commit. Pure.

ArgoCD injects nothing into hook pods. It records the operation's full revision in
`status.operationState.syncResult.revision` (`revisions[]`, one per source, for a multi-source Application)
and names a generateName hook Job `<prefix><revision[:7]>-<phase>-<startedAt unix seconds>`
(gitops-engine's `pkg/sync/sync_context.go`; docs/sources.md). The shipped hooks are named Jobs (kustomize refuses
generateName, kubernetes-sigs/kustomize#641), so the Application's operation is the
source; a generated name is used where there is one. A commit made during
a sync is applied by the next sync, never by the one running (docs/guarantees.md, the flow); and a refresh requested
while an operation that started before our commit is running can be lost (argo-cd#21902), so it is asked again
when that operation ends without our revision. Called by the phases with views from `cluster`.
"""

from __future__ import annotations

import dataclasses
import enum
import re
from datetime import datetime
from pathlib import PurePosixPath

from cutover.core.views import ApplicationView
from cutover.errors import InvalidInput

_HOOK_JOB = re.compile(r"(?P<revision>[0-9a-f]{7})-(?P<phase>presync|sync|postsync|syncfail|postdelete)-"
                       r"(?P<started>\d{9,11})$")


def repository_path(path: str, *, what: str) -> str:
    """A path the Application names (its source's, the hydrator's manifest), checked to be one inside the
    repository before cutover reads or builds it: an absolute or `..` path would reach outside the work tree."""
    parts = PurePosixPath(path).parts
    if path.startswith("/") or ".." in parts or "\\" in path:
        raise InvalidInput(f"{what}: {path[:200]!r} is not a path inside the repository", cause="argocd_path",
                           hint="point the Application at a path relative to the repository root, without '..'")
    return path


@dataclasses.dataclass(frozen=True)
class Revision:
    sha: str  # the full revision, or the 7-character prefix when only the Job name knows it
    source: str  # "job+operation" | "job" | "operation"


def hook_revision(job_name: str | None) -> str | None:
    """The 7-character revision prefix in a hook Job's generated name, or None."""
    found = _HOOK_JOB.search(job_name or "")
    return found.group("revision") if found else None


def syncing_revision(job_name: str | None, app: ApplicationView | None) -> Revision | None:
    """The revision this hook's sync applies; None when neither the Job nor the Application tells."""
    prefix = hook_revision(job_name)
    operation = app.operation_revision if app else None
    if prefix and operation and operation.startswith(prefix):
        return Revision(operation, "job+operation")
    if prefix:
        # The operation may not name its revision yet (the hook can start before that status lands),
        # or it names another one (a newer operation): the Job's own name is the truth for this hook.
        return Revision(prefix, "job")
    if operation:
        return Revision(operation, "operation")
    return None


class SyncState(enum.Enum):
    SYNCED = "synced"  # our revision is applied, in sync and healthy
    WAITING = "waiting"
    REFRESH_AGAIN = "refresh_again"  # an operation that began before our commit ended without it
    FAILED = "failed"  # the operation on our revision failed


def judge_sync(app: ApplicationView, *, revision: str, committed_at: datetime) -> SyncState:
    on_ours = app.operation_revision == revision
    if on_ours and (app.operation_phase in ("Failed", "Error") or app.failed_waiting):
        return SyncState.FAILED
    if app.sync_revision == revision and app.sync_status == "Synced" and app.health == "Healthy" and \
            (app.operation_phase in (None, "Succeeded")) and (on_ours or app.operation_revision is None):
        return SyncState.SYNCED
    older = app.operation_started is not None and app.operation_started < committed_at
    if not on_ours and older and app.operation_phase in ("Succeeded", "Failed", "Error") and \
            not app.refresh_requested:
        return SyncState.REFRESH_AGAIN
    return SyncState.WAITING


def applied_revision(app: ApplicationView, commit: str) -> str | None:
    """The revision ArgoCD syncs for our commit: the commit itself, or, with the Source Hydrator, the hydratedSHA
    once `currentOperation.drySHA` is our commit and its phase is Hydrated (None until then; docs/sources.md,
    ArgoCD's Source Hydrator user guide)."""
    hydrator = app.hydrator
    if hydrator is None:
        return commit
    if hydrator.dry_sha == commit and hydrator.phase == "Hydrated":
        return hydrator.hydrated_sha
    return None


def refresh_waits(phase: str | None, *, always: bool = False) -> bool:
    """Whether a refresh must wait for the Application's operation to end: from ArgoCD 3.4 a comparison with a new
    revision while an operation runs makes the sync that follows a self-heal of the changed objects alone, without
    hooks (argo-cd#27875, seen on v3.5.3). ArgoCD compares with Git itself as each operation ends. `always`
    (`argocd.refresh: always`): never, for an ArgoCD with the fixed self-heal delay, where it syncs in full."""
    return not always and phase in ("Running", "Terminating")


def hookless(*, always: bool) -> str:
    """Why a sync applied a commit of cutover's without running its hooks, for the audit's hint: a person's selective
    sync (argo-cd#22795), or a commit compared while its sync ran (argo-cd#27875), which cutover itself causes only
    with `argocd.refresh: always` on an ArgoCD without the fixed self-heal delay (docs/install.md)."""
    compared = ("`argocd.refresh: always` on an ArgoCD without the fixed self-heal delay (argo-cd#27875): set the "
                "delay's two argocd-cmd-params-cm keys (docs/install.md), selfHeal: false on the Application, or "
                "`argocd.refresh: true`" if always else
                "a self-heal of a commit compared while its sync ran (argo-cd#27875: a Git webhook at the push; "
                "selfHeal: false on the Application keeps every hop's hooks, docs/install.md step 7)")
    return f"a selective sync (argo-cd#22795), or {compared}"
