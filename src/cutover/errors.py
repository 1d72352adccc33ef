"""The error tree of cutover, and the exit codes it maps to.

Every error that reaches a user carries a stable ``cause`` code (for logs, Slack and the table in
docs/causes.md) and a ``hint`` (what to do next). Adapters translate foreign exceptions into
these at their boundary, chained with ``from exc``; the CLI maps them to exit codes (docs/commands.md).

    CutoverError                    exit 1 unless a subclass says otherwise
    ├── InvalidInput                exit 2: plan, arguments or input file; nothing was touched
    ├── TargetNotReady              exit 3: budget exhausted, or failed fast
    ├── NamesNotProven              exit 4
    ├── GitError                    exit 5
    ├── VerificationFailed          exit 6
    │   └── GapExceeded             exit 6: a handoff's maxGap passed; the source was restored
    ├── SyncTimeout                 exit 7
    ├── LockHeld                    exit 8
    └── ClusterError                exit 1 unless retried away: the Kubernetes API failed us
        ├── ClusterUnavailable      retryable: 5xx, 429, dropped connections
        └── ClusterConflict         a compare-and-swap write lost (409): re-read and decide again
"""

from __future__ import annotations

import enum


class ExitCode(enum.IntEnum):
    """Stable exit codes, documented in docs/commands.md."""

    OK = 0
    INTERNAL = 1
    INVALID_INPUT = 2
    TARGET_NOT_READY = 3
    NAMES_NOT_PROVEN = 4
    GIT = 5
    VERIFICATION_FAILED = 6
    SYNC_TIMEOUT = 7
    LOCK_HELD = 8


class CutoverError(Exception):
    """An error with a stable cause code and a hint for the person reading it."""

    exit_code: ExitCode = ExitCode.INTERNAL
    default_cause: str = "internal"

    def __init__(self, message: str, *, cause: str | None = None, hint: str = "") -> None:
        super().__init__(message)
        self.message = message
        self.cause = cause or self.default_cause
        self.hint = hint
        self.announced = False  # logged as the `cutover.failed` milestone already (the CLI says it once)

    def __str__(self) -> str:
        return self.message


class InvalidInput(CutoverError):
    exit_code = ExitCode.INVALID_INPUT
    default_cause = "invalid_input"


class TargetNotReady(CutoverError):
    exit_code = ExitCode.TARGET_NOT_READY
    default_cause = "target_not_ready"


class NamesNotProven(CutoverError):
    exit_code = ExitCode.NAMES_NOT_PROVEN
    default_cause = "names_not_proven"


class GitError(CutoverError):
    exit_code = ExitCode.GIT
    default_cause = "git_error"


class VerificationFailed(CutoverError):
    exit_code = ExitCode.VERIFICATION_FAILED
    default_cause = "verification_failed"


class GapExceeded(VerificationFailed):
    """handoff.strategy recreate: the target was not proven within handoff.maxGap; the source is restored and the
    Service stays on it (exit 6, as for a switch that did not check out and was rolled back)."""

    default_cause = "gap_exceeded"


class SyncTimeout(CutoverError):
    exit_code = ExitCode.SYNC_TIMEOUT
    default_cause = "sync_timeout"


class LockHeld(CutoverError):
    exit_code = ExitCode.LOCK_HELD
    default_cause = "lock_held"


class ClusterError(CutoverError):
    default_cause = "cluster_api_error"


class ClusterUnavailable(ClusterError):
    """Temporary: worth retrying (5xx, 429, a dropped connection)."""

    default_cause = "cluster_api_unavailable"


class ArgoCDError(ClusterError):
    """ArgoCD's API (`argocd.server`): part of the cluster's control plane, so exit 1 like the Kubernetes API, but
    named for what it is."""

    default_cause = "argocd_api_error"


class ArgoCDUnavailable(ArgoCDError, ClusterUnavailable):
    """ArgoCD's API answered 5xx or 429, too slowly, or not at all: retried, then reported as such."""

    default_cause = "argocd_api_unavailable"


class ClusterConflict(ClusterError):
    """A compare-and-swap write lost: the object changed since it was read (409)."""

    default_cause = "cluster_conflict"
