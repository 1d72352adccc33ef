"""Write the selector change to Git: read, decide, edit, compare-and-swap, and never twice.

Every attempt starts from a fresh read. If Git already holds the target selector, nothing is written
and the commit that did it is reported (found by its trailers). If Git holds a selector that is no
backend of the plan, someone else changed it: stop and say who, in which commit. Otherwise the edit
(with its guard) is written with the version just read; a host answering "stale" means another writer
won the race, so read again and decide again, up to 10 times (1 s × 1.5, capped at 30 s, the figures
Kargo uses for its own pushes). Called by the phases; pure decisions are `decide()` and `message()`.
"""

from __future__ import annotations

import asyncio
import dataclasses
import enum
from collections.abc import Awaitable, Callable, Mapping

import structlog
import tenacity

from cutover import manifest
from cutover.errors import GitError
from cutover.githost.base import Author, ChangeRequest, Commit, GitHost, StaleVersion
from cutover.plan import Plan

log = structlog.get_logger("cutover")

CONFLICT_TRIES = 10
MERGE_POLL = 30.0  # seconds between looks at an open pull request (Kargo's git-wait-for-pr polls every 30 s)
MERGE_WAIT = 3600.0  # how long a pull-request-mode cutover waits for someone to merge


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
    change: ChangeRequest | None = None  # the pull request, in pull-request mode


def _backoff() -> tenacity.AsyncRetrying:
    return tenacity.AsyncRetrying(
        retry=tenacity.retry_if_exception_type(StaleVersion),
        wait=tenacity.wait_exponential(multiplier=1.0, exp_base=1.5, max=30.0) + tenacity.wait_random(0, 0.5),
        stop=tenacity.stop_after_attempt(CONFLICT_TRIES),
        before_sleep=lambda state: log.warning("git.conflict_retry", attempt=state.attempt_number,
                                               of=CONFLICT_TRIES, next_in=round(state.upcoming_sleep, 2)),
        reraise=True,
    )


async def commit_selector(host: GitHost, plan: Plan, *, to_backend: str, text: str, author: Author,
                          merge_wait: float = MERGE_WAIT,
                          before_write: Callable[[], Awaitable[None]] | None = None) -> Result:
    """Make Git hold `to_backend`'s selector; `text` is the commit message. At most one commit (or, in
    pull-request mode, one pull request, waited on until merged)."""
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
                if before_write is not None:  # e.g. re-prove a stale proof, check the Lease is still ours
                    await before_write()
                if git.mode == "pull-request":
                    return await _through_pull_request(host, plan, to_backend, edit, text=text, author=author,
                                                       merge_wait=merge_wait)
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


async def last_cutover(host: GitHost, plan: Plan) -> Commit | None:
    """The newest cutover commit of this plan on the file: the state the phases read back."""
    return next((commit for commit in await host.history(plan.git.path)
                 if commit.trailers.get("Cutover-Plan") == plan.name), None)


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


def change_branch(plan: Plan, to_backend: str) -> str:
    """One branch per cutover target, so that a re-run finds its own open pull request."""
    return f"cutover/{plan.name}-to-{to_backend}"


async def _through_pull_request(host: GitHost, plan: Plan, to_backend: str, edit: manifest.SelectorEdit, *,
                                text: str, author: Author, merge_wait: float) -> Result:
    title, _, body = text.partition("\n\n")
    def rewrite(content: str) -> str:  # the edit, made again on the file as the new branch holds it
        return manifest.edit_selector(content, document=plan.git.document, selector_path=plan.git.selector_path,
                                      selector=edit.new, source=plan.git.path).after

    change = await host.open_change(plan.git.path, rewrite, message=text, author=author,
                                    branch=change_branch(plan, to_backend), title=title, body=body)
    log.info("git.change_opened", url=change.url, number=change.number, branch=change.branch, to=to_backend)
    loop = asyncio.get_running_loop()
    deadline = loop.time() + merge_wait
    while True:
        state = await host.change_state(change)
        if state.state == "merged":
            log.info("git.committed", path=plan.git.path, commit=state.merge_sha, url=change.url, to=to_backend,
                     via="pull-request")
            return Result(True, state.merge_sha or "", change.url, 1, edit.diff(plan.git.path), change)
        if state.state == "closed":
            raise GitError(f"pull request {change.url} was closed without merging", cause="git_change_closed",
                           hint="reopen and merge it, or re-run to open a new one")
        if loop.time() + MERGE_POLL > deadline:
            raise GitError(f"pull request {change.url} is not merged after {merge_wait:.0f}s",
                           cause="git_change_pending", hint="merge it, then re-run: the cutover continues from there")
        log.info("git.change_waiting", url=change.url, waited=round(merge_wait - (deadline - loop.time())))
        await asyncio.sleep(MERGE_POLL)
