"""Write the selector change to Git: read, decide, edit, compare-and-swap, and never twice.

Every attempt decides on a read of the file (the first may use the one its phase already made, `Seen`). If
Git already holds the target selector, nothing is written and the commit that did it is reported (found by
its trailers). If Git holds a selector that is no backend of the plan, someone else changed it: stop and say
who, in which commit. Otherwise the source's edit (with its guard) is written with the version just read; a
host answering "stale" means another writer won the race, so read again and decide again, up to 10 times
(1 s × 1.5, capped at 30 s, the figures Kargo uses for its own pushes). The decisions are `switch.git_step`
and `commits.commit_to`; `message()` renders the commit. Called by the phases.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Awaitable, Callable, Mapping, Sequence

import structlog
import tenacity

from cutover import sources
from cutover.core import commits, milestones, switch
from cutover.core.deadline import MERGE_WAIT  # how long a pull-request-mode cutover waits for a merge
from cutover.core.repository import Author, ChangeRequest, FileVersion, GitHost
from cutover.core.trailers import Trailers
from cutover.core.views import Commit
from cutover.errors import GitError
from cutover.githost.base import StaleVersion
from cutover.plan import Plan
from cutover.sources import SelectorEdit, Source
from cutover.sources.field_edit import FieldEdit

log = structlog.get_logger("cutover")

CONFLICT_TRIES = 10
HISTORY_PAGE, HISTORY_PAGES = 20, 25  # the file's history is read a page at a time, up to 500 commits back
MERGE_POLL = 30.0  # seconds between looks at an open pull request (Kargo's git-wait-for-pr polls every 30 s)


@dataclasses.dataclass(frozen=True)
class Proof:
    """What the commit body says about the proof behind it."""

    pods: tuple[str, ...]
    names: tuple[str, ...]
    method: str
    waited: float
    proven_at: str
    table: tuple[str, ...] = ()  # docs/fitness.md: the fitness table, old beside new



@dataclasses.dataclass(frozen=True)
class Seen:
    """The file and its history as the phase read them: the first attempt decides on these, not a new read."""

    version: FileVersion
    history: Sequence[Commit]
    selector: Mapping[str, str]  # what the source read in `version`: not parsed twice


async def history(host: GitHost, plan: Plan) -> list[Commit]:
    """The file's history back to the newest cutover commit of this plan (a rollback's hold lives there, however
    many commits people made since), read a page at a time; past HISTORY_PAGES pages without one, the plan is
    taken as never to have switched this file, and the log says so."""
    seen: list[Commit] = []
    for page in range(1, HISTORY_PAGES + 1):
        batch = await host.history(plan.git.path, limit=HISTORY_PAGE, page=page)
        seen += batch
        if commits.last_cutover(batch, plan) is not None or len(batch) < HISTORY_PAGE:
            return seen
    log.warning("git.history_bound", path=plan.git.path, commits=len(seen), cause="git_history_deep",
                hint=f"no cutover commit of {plan.name} in the file's last {len(seen)} commits: a rollback's hold "
                     "older than that is not seen; run `cutover run --to BACKEND` to be explicit")
    return seen


def message(plan: Plan, *, trailers: Trailers, proof: Proof | None, note: str | None = None) -> str:
    """The commit message: title, proof summary, how the edit was checked, trailers (docs/reporting.md). Never holds a
    secret."""
    title = f"cutover({plan.service.name}): {trailers.source or 'unknown'} -> {trailers.to}"
    body = []
    if proof is not None:
        body.append(f"Proven {proof.proven_at}: {len(proof.pods)} Ready pod(s) answered "
                    f"{', '.join(proof.names)} ({proof.method}) after waiting {proof.waited:.0f}s.")
        body.append("Pods: " + ", ".join(proof.pods))
    if note:
        body.append(note)
    if proof is not None and proof.table:  # indented: a block of its own in Git UIs, never mistaken for trailers
        body.append("\nFitness (verify.fitness):\n" + "\n".join(f"    {line}" for line in proof.table))
    return "\n\n".join([title, *(["\n".join(body)] if body else []), trailers.render()]) + "\n"


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


@dataclasses.dataclass
class _Writer:
    host: GitHost
    plan: Plan
    source: Source
    to: str
    text: str
    author: Author
    merge_wait: float
    before_write: Callable[[], Awaitable[None]] | None
    seen: Seen | None

    async def read(self) -> tuple[FileVersion, dict[str, str], switch.GitStep, Sequence[Commit] | None]:
        """The first attempt decides on what the phase saw, with its history, unless that shows a selector that
        is no backend of the plan (it may have been mended during the wait: look again); every later attempt
        reads anew."""
        git, target = self.plan.git, self.plan.backend(self.to).selector
        known = [backend.selector for name, backend in self.plan.backends.items() if name != self.to]
        if self.seen is not None:
            seen, self.seen = self.seen, None
            now = dict(seen.selector)
            step = switch.git_step(now, target=target, known=known)
            if step is not switch.GitStep.FOREIGN:
                return seen.version, now, step, seen.history
        current = await self.host.read(git.path)
        now = await self.source.selector(current, ref=None, where=git.path)
        return current, now, switch.git_step(now, target=target, known=known), None

    async def attempt(self, number: int) -> Result:
        git = self.plan.git
        current, now, step, history = await self.read()
        if step is switch.GitStep.ALREADY:
            done = commits.commit_to(history if history is not None else await self.host.history(git.path),
                                    self.plan, self.to)
            log.info("git.already", path=git.path, commit=done.sha if done else None, to=self.to)
            return Result(False, done.sha if done else "", None, number)
        if step is switch.GitStep.FOREIGN:
            raise await _foreign(self.host, self.plan, now)
        edit = await self.source.edit(current, self.plan.backend(self.to).selector, where=git.path)
        if self.before_write is not None:  # e.g. re-prove a stale proof, check the Lease is still ours
            await self.before_write()
        if git.mode == "pull-request":
            return await self.through_pull_request(edit)
        written = await self.host.write(git.path, edit.after, expected=current, message=self.text, author=self.author)
        await self.confirm(written.sha, edit)
        log.info(milestones.COMMITTED, path=git.path, commit=written.sha, url=written.url, to=self.to,
                 attempts=number)
        return Result(True, written.sha, written.url, number, edit.diff(git.path))

    async def confirm(self, sha: str, edit: SelectorEdit) -> None:
        await _read_back(self.host, self.plan.git.path, edit.after, sha)

    async def through_pull_request(self, edit: SelectorEdit) -> Result:
        git = self.plan.git
        title, _, body = self.text.partition("\n\n")

        def rewrite(content: str) -> str:  # the edit, made again on the file as the new branch holds it
            return self.source.rewrite(content, edit.new, where=git.path).after

        change = await self.host.open_change(git.path, rewrite, message=self.text, author=self.author,
                                             branch=change_branch(self.plan, self.to), title=title, body=body)
        log.info(milestones.CHANGE_OPENED, url=change.url, number=change.number, branch=change.branch, to=self.to)
        merged = await _merged(self.host, change, merge_wait=self.merge_wait)
        log.info(milestones.COMMITTED, path=git.path, commit=merged, url=change.url, to=self.to, via="pull-request")
        return Result(True, merged or "", change.url, 1, edit.diff(git.path), change)


async def commit_selector(host: GitHost, plan: Plan, *, to_backend: str, text: str, author: Author,
                          source: Source | None = None,
                          merge_wait: float = MERGE_WAIT, before_write: Callable[[], Awaitable[None]] | None = None,
                          seen: Seen | None = None) -> Result:
    """Make Git hold `to_backend`'s selector; `text` is the commit message. At most one commit (or, in
    pull-request mode, one pull request, waited on until merged). `source` defaults to the plan's."""
    writer = _Writer(host, plan, source or sources.for_plan(plan, host=host), to_backend, text, author, merge_wait,
                     before_write, seen)
    try:
        async for attempt in _backoff():
            with attempt:
                return await writer.attempt(attempt.retry_state.attempt_number)
    except StaleVersion as exc:
        raise _kept_changing(plan.git.path) from exc
    raise AssertionError("unreachable")  # pragma: no cover


@dataclasses.dataclass(frozen=True)
class FieldChange:
    """A free or a restore (docs/capacity.md): one field of a workload's file. `edit` makes the guarded edit on the
    text as read (unchanged: Git holds it already); `message` is the commit message for that edit (its trailers
    record what the field held)."""

    path: str
    edit: Callable[[str], FieldEdit]
    message: Callable[[FieldEdit], str]
    branch: str  # the pull request's branch, in pull-request mode
    check: Callable[[FileVersion, FieldEdit], Awaitable[None]] | None = None  # the render check, before the write


async def commit_field(host: GitHost, plan: Plan, change: FieldChange, *, author: Author,
                       before_write: Callable[[], Awaitable[None]] | None = None,
                       merge_wait: float = MERGE_WAIT) -> Result:
    """Make Git hold the field's new value: at most one commit (or one pull request), compare-and-swap as for the
    selector, read back before it counts. A file that holds the value already is a re-run: nothing written."""
    try:
        async for attempt in _backoff():
            with attempt:
                return await _write_field(host, plan, change, author=author, before_write=before_write,
                                          merge_wait=merge_wait, number=attempt.retry_state.attempt_number)
    except StaleVersion as exc:
        raise _kept_changing(change.path) from exc
    raise AssertionError("unreachable")  # pragma: no cover


async def _write_field(host: GitHost, plan: Plan, change: FieldChange, *, author: Author,
                       before_write: Callable[[], Awaitable[None]] | None, merge_wait: float,
                       number: int) -> Result:
    current = await host.read(change.path)
    edit = change.edit(current.content)
    if not edit.changed:
        log.info("git.already", path=change.path, field=str(edit.field), value=edit.old)
        return Result(False, "", None, number)
    if change.check is not None:
        await change.check(current, edit)
    if before_write is not None:
        await before_write()
    text = change.message(edit)
    if plan.git.mode == "pull-request":
        title, _, body = text.partition("\n\n")
        request = await host.open_change(change.path, lambda content: change.edit(content).after, message=text,
                                         author=author, branch=change.branch, title=title, body=body)
        log.info(milestones.CHANGE_OPENED, url=request.url, number=request.number, branch=request.branch)
        merged = await _merged(host, request, merge_wait=merge_wait)
        return Result(True, merged or "", request.url, 1, edit.diff(change.path), request)
    written = await host.write(change.path, edit.after, expected=current, message=text, author=author)
    await _read_back(host, change.path, edit.after, written.sha)
    log.info(milestones.COMMITTED, path=change.path, commit=written.sha, url=written.url, field=str(edit.field),
             value=edit.new, attempts=number)
    return Result(True, written.sha, written.url, number, edit.diff(change.path))


async def _read_back(host: GitHost, path: str, content: str, sha: str) -> None:
    """Read the file back: a host's word is not a commit until Git holds the edit (docs/guarantees.md #5)."""
    if (await host.read(path)).content != content:
        raise GitError(f"{path}: the host answered the write with {sha[:12] or 'no commit'}, but the branch does not "
                       "hold the edit", cause="git_rejected",
                       hint="a proxy or a branch protection may answer for the host; nothing was counted as committed")


def _kept_changing(path: str) -> GitError:
    return GitError(f"{path} kept changing under us: {CONFLICT_TRIES} compare-and-swap attempts lost",
                    cause="git_conflict", hint="someone or something commits to this file constantly; pause it and "
                                               "re-run")


async def _foreign(host: GitHost, plan: Plan, now: dict[str, str]) -> GitError:
    history = await host.history(plan.git.path, limit=1)
    culprit = f" in commit {history[0].sha[:12]} by {history[0].author} ({history[0].title!r})" if history else ""
    shown = ",".join(f"{key}={value}" for key, value in now.items())
    return GitError(f"{plan.git.path}: the selector is {shown}, which is no backend of the plan; it was "
                    f"changed{culprit}", cause="git_conflict",
                    hint="someone changed the selector by hand: agree on the target, then update the plan or "
                         "revert that commit")


def change_branch(plan: Plan, to_backend: str) -> str:
    """One branch per cutover target, so that a re-run finds its own open pull request."""
    return plan.branch(f"{plan.name}-to-{to_backend}")


async def _merged(host: GitHost, change: ChangeRequest, *, merge_wait: float) -> str | None:
    """The merge commit, once someone merged the request; git_change_closed / git_change_pending otherwise."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + merge_wait
    while True:
        state = await host.change_state(change)
        if state.state == "merged":
            return state.merge_sha
        if state.state == "closed":
            raise GitError(f"pull request {change.url} was closed without merging", cause="git_change_closed",
                           hint="reopen and merge it, or re-run to open a new one")
        if loop.time() + MERGE_POLL > deadline:
            raise GitError(f"pull request {change.url} is not merged after {merge_wait:.0f}s",
                           cause="git_change_pending", hint="merge it, then re-run: the cutover continues from there")
        log.info("git.change_waiting", url=change.url, waited=round(merge_wait - (deadline - loop.time())))
        await asyncio.sleep(MERGE_POLL)
