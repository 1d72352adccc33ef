"""Write the selector change to Git: read, decide, edit, compare-and-swap, and never twice.

Every attempt starts from a fresh read. If Git already holds the target selector, nothing is written
and the commit that did it is reported (found by its trailers). If Git holds a selector that is no
backend of the plan, someone else changed it: stop and say who, in which commit. Otherwise the edit
(with its guard) is written with the version just read; a host answering "stale" means another writer
won the race, so read again and decide again, up to 10 times (1 s × 1.5, capped at 30 s, the figures
Kargo uses for its own pushes). Called by the phases; pure decisions are `decide()` and `message()`.
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Mapping

import structlog
import tenacity

from cutover import manifest
from cutover.errors import GitError
from cutover.githost.base import Author, Commit, GitHost, StaleVersion
from cutover.plan import Plan

log = structlog.get_logger("cutover")

CONFLICT_TRIES = 10


class Step(enum.Enum):
    ALREADY = "already"  # Git holds the target selector: nothing to write
    WRITE = "write"  # Git holds another backend's selector: write ours
    FOREIGN = "foreign"  # Git holds a selector that is no backend of the plan: someone else's change


def decide(current: Mapping[str, str], *, target: Mapping[str, str], known: list[Mapping[str, str]]) -> Step:
    if dict(current) == dict(target):
        return Step.ALREADY
    if any(dict(current) == dict(selector) for selector in known):
        return Step.WRITE
    return Step.FOREIGN


@dataclasses.dataclass(frozen=True)
class Proof:
    """What the commit body says about the proof behind it."""

    pods: tuple[str, ...]
    names: tuple[str, ...]
    method: str
    waited: float
    proven_at: str


def message(plan: Plan, *, from_backend: str | None, to_backend: str, cutover_id: str, proof: Proof | None,
            service_uid: str = "", cluster_ip: str = "", hold: str | None = None) -> str:
    """The commit message: title, proof summary, trailers (SPEC §7). Never holds a secret."""
    title = f"cutover({plan.service.name}): {from_backend or 'unknown'} -> {to_backend}"
    body = []
    if proof is not None:
        body.append(f"Proven {proof.proven_at}: {len(proof.pods)} Ready pod(s) answered "
                    f"{', '.join(proof.names)} ({proof.method}) after waiting {proof.waited:.0f}s.")
        body.append("Pods: " + ", ".join(proof.pods))
    trailer_lines = [f"Cutover-Id: {cutover_id}", f"Cutover-From: {from_backend or 'unknown'}",
                     f"Cutover-To: {to_backend}", f"Cutover-Plan: {plan.name}"]
    if service_uid:
        trailer_lines.append(f"Cutover-Service-Uid: {service_uid}")
    if cluster_ip:
        trailer_lines.append(f"Cutover-Cluster-Ip: {cluster_ip}")
    if hold:
        trailer_lines.append(f"Cutover-Hold: {hold}")
    return "\n\n".join([title, *(["\n".join(body)] if body else []), "\n".join(trailer_lines)]) + "\n"


@dataclasses.dataclass(frozen=True)
class Result:
    committed: bool
    sha: str
    url: str | None
    attempts: int
    diff: str = ""


def _backoff() -> tenacity.AsyncRetrying:
    return tenacity.AsyncRetrying(
        retry=tenacity.retry_if_exception_type(StaleVersion),
        wait=tenacity.wait_exponential(multiplier=1.0, exp_base=1.5, max=30.0) + tenacity.wait_random(0, 0.5),
        stop=tenacity.stop_after_attempt(CONFLICT_TRIES),
        before_sleep=lambda state: log.warning("git.conflict_retry", attempt=state.attempt_number,
                                               of=CONFLICT_TRIES, next_in=round(state.upcoming_sleep, 2)),
        reraise=True,
    )


async def commit_selector(host: GitHost, plan: Plan, *, to_backend: str, text: str, author: Author) -> Result:
    """Make Git hold `to_backend`'s selector; `text` is the commit message. At most one commit."""
    git = plan.git
    target = plan.backend(to_backend).selector
    known = [backend.selector for name, backend in plan.backends.items() if name != to_backend]
    try:
        async for attempt in _backoff():
            with attempt:
                current = await host.read(git.path)
                now = manifest.read_selector(current.content, document=git.document,
                                             selector_path=git.selector_path, source=git.path)
                step = decide(now, target=target, known=known)
                if step is Step.ALREADY:
                    done = await _find(host, plan, to_backend)
                    log.info("git.already", path=git.path, commit=done.sha if done else None, to=to_backend)
                    return Result(False, done.sha if done else "", None, attempt.retry_state.attempt_number)
                if step is Step.FOREIGN:
                    raise await _foreign(host, plan, now)
                edit = manifest.edit_selector(current.content, document=git.document,
                                              selector_path=git.selector_path, selector=target, source=git.path)
                written = await host.write(git.path, edit.after, expected=current, message=text, author=author)
                log.info("git.committed", path=git.path, commit=written.sha, url=written.url, to=to_backend,
                         attempts=attempt.retry_state.attempt_number)
                return Result(True, written.sha, written.url, attempt.retry_state.attempt_number,
                              edit.diff(git.path))
    except StaleVersion as exc:
        raise GitError(f"{git.path} kept changing under us: {CONFLICT_TRIES} compare-and-swap attempts lost",
                       cause="git_conflict", hint="someone or something commits to this file constantly; "
                                                  "pause it and re-run") from exc
    raise AssertionError("unreachable")  # pragma: no cover


async def _find(host: GitHost, plan: Plan, to_backend: str) -> Commit | None:
    for commit in await host.history(plan.git.path):
        if commit.trailers.get("Cutover-To") == to_backend and commit.trailers.get("Cutover-Plan") == plan.name:
            return commit
    return None


async def _foreign(host: GitHost, plan: Plan, now: Mapping[str, str]) -> GitError:
    history = await host.history(plan.git.path, limit=1)
    culprit = f" in commit {history[0].sha[:12]} by {history[0].author} ({history[0].title!r})" if history else ""
    shown = ",".join(f"{key}={value}" for key, value in now.items())
    return GitError(f"{plan.git.path}: the selector is {shown}, which is no backend of the plan; it was "
                    f"changed{culprit}", cause="git_conflict",
                    hint="someone changed the selector by hand: agree on the target, then update the plan or "
                         "revert that commit")
