"""What every Git provider shares: the HTTP host (`HttpHost`: answers capped, archives unpacked with care,
redirects checked), the retry policy (`retrying`), how answers become errors (`classify`). The protocol itself,
`GitHost`, and the values it trades in live in `cutover.core.repository`; providers implement it in a module
each; `flows.writeback` tells the story.

Errors here are the Git branch of the tree in `cutover.errors`:

    GitError (exit 5)
    ├── StaleVersion        the file moved since we read it: re-read, re-decide, retry (not an error to the user)
    ├── HostUnavailable     5xx, 429, rate limits, dropped connections: retried per `retrying`
    └── (GitError itself)   auth, not found, a true content conflict: permanent
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import email.utils
import gzip
import io
import shutil
import tarfile
import tempfile
import time
from collections.abc import AsyncIterator
from pathlib import Path, PurePosixPath
from typing import IO, Any
from urllib.parse import quote, urlsplit

import httpx
import structlog
import tenacity

from cutover import patience, trust
from cutover.core import bounded
from cutover.core.repository import GitHost
from cutover.errors import GitError, InvalidInput
from cutover.plan import GitSettings, secrets

__all__ = ["HostUnavailable", "HttpHost", "StaleVersion", "classify", "escaped", "retrying", "token"]

log = structlog.get_logger("cutover.git")

RETRY_AFTER_CAP = 120.0  # seconds we are willing to wait on one rate-limit answer


def escaped(value: str) -> str:
    """`value` (a file path, a branch, an owner) for a hosting URL's path: each '/'-separated segment
    percent-escaped with nothing safe. An empty, '.' or '..' segment is refused, not escaped: escaping leaves dots
    as they are, and the URL would climb out of its place (`x/../../main` reaching `refs/heads/main`)."""
    parts = value.split("/")
    if any(part in ("", ".", "..") for part in parts):
        raise InvalidInput(f"{value!r} cannot name part of a hosting URL: it has an empty, '.' or '..' segment",
                           cause="invalid_plan", hint="name branches and paths without empty, '.' or '..' parts")
    return "/".join(quote(part, safe="") for part in parts)


class StaleVersion(GitError):
    default_cause = "git_stale_version"


class HostUnavailable(GitError):
    default_cause = "git_host_unavailable"

    def __init__(self, message: str, *, retry_after: float | None = None, hint: str = "") -> None:
        super().__init__(message, hint=hint or "the Git host is overloaded or rate limiting; retried")
        self.retry_after = retry_after


def _host_of(exc: httpx.TransportError) -> str:
    """host:port of the request a transport error belongs to, as far as it is known."""
    try:
        url = exc.request.url
    except RuntimeError:  # an error raised before any request was bound to it
        return "the host"
    return f"{url.host}:{url.port or (443 if url.scheme == 'https' else 80)}"


def decoded(content: str, *, where: str) -> str:
    """A host's base64 file content as text: strictly base64 (`validate`; the hosts wrap lines, which are
    dropped first), and UTF-8; anything else is no file cutover can edit."""
    try:
        raw = base64.b64decode("".join(content.split()), validate=True)
    except (ValueError, binascii.Error) as exc:
        raise GitError(f"{where}: the content is not valid base64", cause="git_rejected",
                       hint="the host answered with something that is not the file") from exc
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InvalidInput(f"{where}: not UTF-8 text (byte {exc.start})", cause="invalid_file",
                           hint="save the file as UTF-8 in Git") from exc


ARCHIVE_CAP = 32 << 20  # bytes of a repository archive we take (on disk, never in memory): a GitOps repo is text
UNPACKED_CAP = 64 << 20  # bytes it may unpack to: two trees (candidate, current) fit the Jobs' 256 Mi /tmp
INFLATED_CAP = UNPACKED_CAP + (32 << 20)  # bytes of tar stream it may inflate: the files, headers and padding
MEMBERS_CAP = 20_000  # entries it may hold: a tar of millions of empty files is a bomb of another kind
ANSWER_CAP = 16 << 20  # bytes of any other answer: a file (1 MiB at most, base64) or a page of history
DEADLINE = 60.0  # seconds for one whole answer: httpx's timeout bounds each read, not a body dripped slowly
ARCHIVE_DEADLINE = 120.0  # seconds for one whole archive, redirects included
MAX_REDIRECTS = 3  # an archive's: GitHub's tarball takes one (to codeload.github.com)


def redirected(response: httpx.Response, *, what: str) -> httpx.Request:
    """The request a redirect asks for, carrying no credential (only the User-Agent): its target is another
    server's to choose. Refused: no Location, a scheme other than http(s), and https → http (a downgrade would
    put the archive, and whatever the URL holds, on the wire in the clear)."""
    location = response.headers.get("location")
    source = response.request.url
    target = source.join(location) if location else None
    if target is None or target.scheme not in ("http", "https") or (source.scheme == "https" and
                                                                   target.scheme != "https"):
        where = f"{target.scheme}://{target.host}" if target is not None else "nowhere"
        raise GitError(f"{what}: answered {response.status_code}, redirecting to {where}, which is not followed",
                       cause="git_redirect", hint="an archive is followed only from https to https; check git.url "
                                                  "and git.apiUrl")
    return httpx.Request("GET", target, headers={"User-Agent": "cutover", "Accept-Encoding": "identity"})


def unpack(archive: bytes | IO[bytes], into: Path, *, what: str) -> Path:
    """A host's .tar.gz of a tree, written out under `into` without its single top directory (every host names
    that directory its own way): regular files and directories only, under UNPACKED_CAP bytes and MEMBERS_CAP
    entries, each checked before a byte is written. Links, devices and sparse files are skipped (a link loop
    `a -> .` grew a copy of the tree without end); an absolute or `..` name refuses the whole archive. Written
    here rather than by tarfile's `data` filter, which some 3.11 releases let links slip past (CVE-2025-4517)."""
    source = io.BytesIO(archive) if isinstance(archive, bytes | bytearray) else archive
    try:
        with _Inflated(source, what=what) as stream, tarfile.open(fileobj=stream, mode="r:") as tar:
            members = _members(tar, what=what)
            tops = {member.name.split("/", 1)[0] for member in members}
            strip = len(tops) == 1 and all("/" in m.name or m.isdir() for m in members)
            skipped = _write_out(tar, members, into, strip=strip, what=what)
    except (tarfile.TarError, OSError, EOFError) as exc:
        raise GitError(f"{what}: the archive cannot be unpacked ({type(exc).__name__}: {exc})", cause="git_rejected",
                       hint="the host answered with something that is not the repository") from exc
    if skipped:
        log.info("git.archive_skipped", what=what, entries=skipped, why="links and special files are not unpacked")
    return into


class _Inflated:
    """An archive's tar stream, inflated as tarfile reads and skips it and never past INFLATED_CAP: tarfile inflates
    every member's data to reach the next header, so the sizes checked before writing came too late for one member
    of 2 GiB in 2 MiB of gzip (6.5 s of CPU before the refusal); a skip beyond the cap is refused before it inflates
    a byte (docs/security.md)."""

    def __init__(self, source: IO[bytes], *, what: str) -> None:
        self._gzip = gzip.GzipFile(fileobj=source, mode="rb")
        self._what = what

    def __enter__(self) -> _Inflated:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def close(self) -> None:
        self._gzip.close()

    def write(self, _: bytes, /) -> int:
        raise io.UnsupportedOperation("an archive is only read")

    def tell(self) -> int:
        return self._gzip.tell()

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        target = offset if whence == io.SEEK_SET else self.tell() + offset if whence == io.SEEK_CUR else -1
        if target < 0 or target > INFLATED_CAP:
            raise too_large(self._what, f"more than {UNPACKED_CAP >> 20} MiB unpacked")
        return self._gzip.seek(target)

    def read(self, size: int = -1) -> bytes:
        room = INFLATED_CAP - self.tell()
        data = self._gzip.read(room + 1 if size < 0 else min(size, room + 1))
        if self.tell() > INFLATED_CAP:
            raise too_large(self._what, f"more than {UNPACKED_CAP >> 20} MiB unpacked")
        return data


def _members(tar: tarfile.TarFile, *, what: str) -> list[tarfile.TarInfo]:
    members: list[tarfile.TarInfo] = []
    for member in tar:
        if len(members) >= MEMBERS_CAP:
            raise too_large(what, f"more than {MEMBERS_CAP} entries")
        members.append(member)
    return members


def _write_out(tar: tarfile.TarFile, members: list[tarfile.TarInfo], into: Path, *, strip: bool, what: str) -> int:
    """Each regular file and directory of `members` under `into`; how many other entries were skipped."""
    written = skipped = 0
    into.mkdir(parents=True, exist_ok=True)
    for member in members:
        name = member.name.split("/", 1)[1] if strip and "/" in member.name else ("" if strip else member.name)
        parts = PurePosixPath(name).parts
        if not parts:
            continue
        if name.startswith("/") or ".." in parts:
            raise GitError(f"{what}: the entry {name[:200]!r} points outside the tree", cause="git_rejected",
                           hint="the host answered with an archive that is not a repository's")
        if not (member.isreg() or member.isdir()) or member.issparse():
            skipped += 1
            continue
        target = into.joinpath(*parts)
        if member.isdir():
            target.mkdir(parents=True, exist_ok=True)
            continue
        written += member.size
        if written > UNPACKED_CAP:
            raise too_large(what, f"more than {UNPACKED_CAP >> 20} MiB unpacked")
        target.parent.mkdir(parents=True, exist_ok=True)
        found = tar.extractfile(member)
        assert found is not None  # a regular file's
        with found, target.open("wb") as sink:
            shutil.copyfileobj(found, sink)
    return skipped


def too_large(what: str, why: str) -> GitError:
    return GitError(f"{what}: {why}", cause="git_archive_too_large",
                    hint="cutover renders from a GitOps repository's text; render a smaller repository (its own "
                         "for the workload), or keep large files out of it")


class HttpHost(GitHost):
    """A host spoken to over a REST API: one client, one place for retries and error mapping."""

    def __init__(self, *, api_url: str, headers: dict[str, str], transport: httpx.AsyncBaseTransport | None = None,
                 timeout: float = 30.0, ca_file: str | None = None) -> None:
        # identity asked: what comes compressed anyway is inflated under the caps (`_decoded`)
        self.client = httpx.AsyncClient(base_url=api_url.rstrip("/"),
                                        headers={"User-Agent": "cutover", "Accept-Encoding": "identity", **headers},
                                        timeout=timeout, transport=transport, trust_env=False,
                                        verify=trust.context(ca_file))

    def stale(self, response: httpx.Response) -> bool:
        """Whether the host refused a write because the file moved since it was read."""
        return response.status_code == 409

    async def aclose(self) -> None:
        await self.client.aclose()

    async def call(self, method: str, url: str, *, what: str, **kwargs: Any) -> httpx.Response:
        async for attempt in retrying():
            with attempt:
                try:
                    response = await self._answer(method, url, what=what, **kwargs)
                except httpx.TransportError as exc:
                    raise self.unreachable(exc, what=what) from exc
                if method in ("PUT", "POST") and self.stale(response):
                    raise StaleVersion(f"{self.name}: {what}: the file changed since it was read "
                                       f"({response.status_code})")
                error = classify(response, what=what, provider=self.name)
                if error is not None:
                    raise error
                return response
        raise AssertionError("unreachable")  # pragma: no cover

    async def download(self, url: str, *, params: dict[str, str] | None = None, what: str) -> IO[bytes]:
        """A repository archive, at most ARCHIVE_CAP bytes within ARCHIVE_DEADLINE. The first request carries
        the token; a redirect (GitHub sends its tarballs from codeload.github.com) is followed at most
        MAX_REDIRECTS times, never from https to http, and with no credential at all: httpx drops only
        `Authorization` when a redirect leaves the origin, GitLab's `PRIVATE-TOKEN` it would carry anywhere."""
        async for attempt in retrying():
            with attempt:
                try:
                    async with asyncio.timeout(ARCHIVE_DEADLINE):
                        return await self._follow(self.client.build_request("GET", url, params=params),
                                                  what=what)
                except TimeoutError as exc:
                    raise HostUnavailable(f"{self.name}: {what}: no whole archive within {ARCHIVE_DEADLINE:g}s",
                                          hint="the Git host sends the archive too slowly; retried") from exc
                except httpx.TransportError as exc:
                    raise self.unreachable(exc, what=what) from exc
        raise AssertionError("unreachable")  # pragma: no cover

    async def _follow(self, request: httpx.Request, *, what: str) -> IO[bytes]:
        for _ in range(MAX_REDIRECTS + 1):
            response = await self.client.send(request, stream=True)
            try:
                if not response.is_redirect:
                    if response.status_code >= 400:
                        await response.aread()  # classify reads the text (a rate limit says so there)
                        error = classify(response, what=what, provider=self.name)
                        assert error is not None
                        raise error
                    return await _spooled(response, what=f"{self.name}: {what}")
                request = redirected(response, what=f"{self.name}: {what}")
            finally:
                await response.aclose()
        raise GitError(f"{self.name}: {what}: more than {MAX_REDIRECTS} redirects", cause="git_redirect",
                       hint="the Git host redirects the archive in a loop; check git.url and git.apiUrl")

    async def _answer(self, method: str, url: str, *, what: str, **kwargs: Any) -> httpx.Response:
        """The whole answer within DEADLINE and ANSWER_CAP, as a response whose body is read."""
        request = self.client.build_request(method, url, **kwargs)
        try:
            async with asyncio.timeout(DEADLINE):
                response = await self.client.send(request, stream=True)
                try:
                    body = await _capped(response, cap=ANSWER_CAP, what=f"{self.name}: {what}")
                finally:
                    await response.aclose()
        except TimeoutError as exc:
            raise HostUnavailable(f"{self.name}: {what}: no whole answer within {DEADLINE:g}s") from exc
        headers = [(key, value) for key, value in response.headers.multi_items()
                   if key.lower() not in ("content-encoding", "content-length", "transfer-encoding")]
        return httpx.Response(response.status_code, headers=headers, content=body, request=request)

    def unreachable(self, exc: httpx.TransportError, *, what: str) -> GitError:
        """A failed connection: retried, unless the server's certificate is not trusted (that stays so)."""
        reason = trust.untrusted(exc)
        if reason is None:
            host = _host_of(exc)
            return HostUnavailable(f"{self.name}: {what}: no connection to {host} ({type(exc).__name__}"
                                   + (f": {exc}" if str(exc) else "") + ")",
                                   hint=f"{host} did not answer: check its name resolves (DNS), that the Jobs' "
                                        f"egress reaches it (NetworkPolicy cutover-jobs: its port) and any proxy "
                                        f"on the way (HTTPS_PROXY); retried")
        return GitError(f"{self.name}: {what}: the server's TLS certificate is not trusted ({reason})",
                        cause="git_tls", hint="set git.caFile to the PEM bundle of the host's CA "
                                              "(or SSL_CERT_FILE for every HTTPS client)")


def _decoded(response: httpx.Response, *, cap: int) -> AsyncIterator[bytes]:
    """The body's raw bytes inflated under `cap` (core.bounded; identity is asked, but a proxy may compress): httpx
    would inflate each chunk whole before anything could count it."""
    return bounded.decoded(response.aiter_raw(), content_encoding=response.headers.get("content-encoding", ""),
                           cap=cap)


async def _capped(response: httpx.Response, *, cap: int, what: str) -> bytes:
    try:
        return await bounded.collect(response.aiter_raw(), cap=cap,
                                     content_encoding=response.headers.get("content-encoding", ""))
    except bounded.TooLarge:
        raise GitError(f"{what}: the answer is larger than {cap >> 20} MiB decoded", cause="git_rejected",
                       hint="point git.apiUrl at the hosting API (a proxy may be answering)") from None
    except bounded.BadEncoding as exc:
        raise GitError(f"{what}: {exc}", cause="git_rejected",
                       hint="point git.apiUrl at the hosting API (a proxy may be answering)") from None


async def _spooled(response: httpx.Response, *, what: str) -> IO[bytes]:
    """An archive's body in a temporary file (under /tmp, the Jobs' emptyDir), at most ARCHIVE_CAP bytes."""
    spool = tempfile.TemporaryFile()  # noqa: SIM115 (the caller's to read and close)
    try:
        async for chunk in _decoded(response, cap=ARCHIVE_CAP):
            spool.write(chunk)
    except bounded.TooLarge:
        spool.close()
        raise too_large(what, f"the archive is larger than {ARCHIVE_CAP >> 20} MiB") from None
    except bounded.BadEncoding as exc:
        spool.close()
        raise too_large(what, str(exc)) from None
    except BaseException:
        spool.close()
        raise
    spool.seek(0)
    return spool


def token(settings: GitSettings) -> str | None:
    """The token from git.tokenFile, else CUTOVER_GIT_TOKEN, stripped; never logged."""
    if settings.token_file:
        hint = ("mount the cutover-git Secret there (the shipped Jobs do)" if secrets.in_cluster() else
                "on your machine: CUTOVER_SECRETS_DIR=<dir> reads <dir>/git/token in its place, or leave "
                "git.tokenFile out and set CUTOVER_GIT_TOKEN (docs/plan.md, \"Credentials\")")
        return secrets.from_file(settings.token_file, field="git.tokenFile", cause="git_token_missing", hint=hint)
    return secrets.from_env("CUTOVER_GIT_TOKEN")


def retry_after(response: httpx.Response, *, now: float | None = None) -> float | None:
    """Seconds to wait as the host asks: Retry-After (seconds or a date), else a rate-limit reset time."""
    header = response.headers.get("retry-after")
    if header:
        if header.strip().isdigit():
            return min(float(header), RETRY_AFTER_CAP)
        when = email.utils.parsedate_to_datetime(header)
        return min(max(0.0, when.timestamp() - (now or time.time())), RETRY_AFTER_CAP)
    reset = response.headers.get("x-ratelimit-reset") or response.headers.get("ratelimit-reset")
    if reset and reset.strip().isdigit() and response.headers.get("x-ratelimit-remaining", "1") == "0":
        return min(max(0.0, float(reset) - (now or time.time())), RETRY_AFTER_CAP)
    return None


def _wait(state: tenacity.RetryCallState) -> float:
    exc = state.outcome.exception() if state.outcome else None
    asked = getattr(exc, "retry_after", None)
    if asked is not None:
        return float(asked)
    return min(20.0, 2.0 ** (state.attempt_number - 1))


def _log_retry(state: tenacity.RetryCallState) -> None:
    exc = state.outcome.exception() if state.outcome else None
    log.warning("git.retry", attempt=state.attempt_number, error=str(exc),
                next_in=round(state.upcoming_sleep, 2), then="retry")


def retrying() -> tenacity.AsyncRetrying:
    """The retry policy for Git hosts, in one place: 5xx, 429, rate limits and dropped connections, six
    attempts, waiting as long as the host asks (Retry-After, rate-limit reset) or 1, 2, 4, 8, 16 s."""
    return tenacity.AsyncRetrying(retry=tenacity.retry_if_exception_type(HostUnavailable), wait=_wait,
                                  stop=patience.bounded(tenacity.stop_after_attempt(6)), before_sleep=_log_retry,
                                  reraise=True)


def _moved(response: httpx.Response, *, what: str, provider: str) -> GitError:
    moved = urlsplit(response.headers.get("location", "")).hostname or "an unnamed place"
    return GitError(f"{provider} answered {response.status_code} to {what}, redirecting to {moved}",
                    cause="git_rejected", hint="the repository moved (renamed or transferred?): point git.url (and "
                                               "git.apiUrl) at where it lives now")


def classify(response: httpx.Response, *, what: str, provider: str) -> GitError | None:
    """The own error for a host's answer, or None for success: 2xx only. A redirect is never followed with the
    token, and never success: GitHub answers 307 to a write on a renamed repository, and a 3xx taken for a commit
    once let cutover log `git.committed` with nothing in Git. Its Location is named by host, never in full."""
    status = response.status_code
    if 200 <= status < 300:
        return None
    if 300 <= status < 400:
        return _moved(response, what=what, provider=provider)
    wait = retry_after(response)
    if status == 429 or (status == 403 and (wait is not None or "rate limit" in response.text.lower())):
        return HostUnavailable(f"{provider} rate limit on {what} ({status})", retry_after=wait,
                               hint="the token's rate limit is exhausted; retried after the reset")
    if status >= 500:
        return HostUnavailable(f"{provider} answered {status} to {what}", retry_after=wait)
    return _refused(response, what=what, provider=provider)


def _refused(response: httpx.Response, *, what: str, provider: str) -> GitError:
    status = response.status_code
    if status in (401, 403):
        return GitError(f"{provider} refused {what} ({status})", cause="git_auth",
                        hint="check the token and its scopes: it needs read and write on the repository contents")
    if status == 404:
        return GitError(f"{provider}: {what}: not found (404)", cause="git_not_found",
                        hint="check git.url, git.branch and git.path; a token without access also reads as 404")
    return GitError(f"{provider} answered {status} to {what}: {response.text[:200]}", cause="git_rejected",
                    hint="the host refused the request; see the message")
