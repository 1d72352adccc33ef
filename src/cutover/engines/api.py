"""The served-name proof over HTTP: do these pods answer the model names clients send?

Each engine kind's row in `engines.kinds` says how to ask it (health path, whether /v1/models lists every
name, which generation route). `prove()` checks every name on one pod by pod IP and backend port and
classifies each problem (refused, connect timeout, reset, HTTP status, bad JSON) so the caller can tell
"wait longer" from "this will never work". Called by `wait` and `verification`.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import errno
import json
from collections.abc import AsyncIterator, Callable, Iterable
from typing import Any

import httpx

from cutover.core import bounded
from cutover.core.proofs import PodProof, Problem
from cutover.engines.kinds import ENGINES, Profile, answered_by, loaded

BODY_CAP = 1 << 20  # bytes read from any engine response; a model list is a few KiB
DEFAULT_DEADLINE = 10.0  # seconds for a whole answer when the client sets no timeout (the plan's verify.requestTimeout)
Client = httpx.AsyncClient  # what `prove` talks through; callers get one from `new_client`


class Refusal(Exception):
    """An engine request that met a problem; `call` and `classified` raise it, the proofs turn it into a report."""

    def __init__(self, problem: Problem) -> None:
        super().__init__(problem.message)
        self.problem = problem


async def prove(
    client: Client,
    *,
    pod: str,
    ip: str,
    port: int,
    engine: str,
    names: Iterable[str],
    method: str,
    clock: Callable[[], float] | None = None,
    model: str | None = None,
) -> PodProof:
    """Check every name on one pod (and with `model`, that it loaded those weights); never raises for engine
    behaviour, only reports problems."""
    profile, base = ENGINES[engine], base_url(ip, port)
    start = clock() if clock else 0.0
    proven: list[str] = []
    problems: list[Problem] = []
    try:
        await _health(client, base, profile)
        cards = await models(client, base) if model is not None or method == "listed" else []
        if model is not None and (wrong := loaded(model, cards)) is not None:
            problems.append(wrong)
        elif method == "listed":
            listed = {card["id"] for card in cards if isinstance(card.get("id"), str)}
            for name in names:
                if name in listed:
                    proven.append(name)
                else:
                    problems.append(Problem("name_not_listed", f"{name!r} is not in /v1/models (lists: "
                                                               f"{', '.join(sorted(listed)) or 'nothing'})",
                                            retryable=False, name=name))
        else:
            for name in names:
                problem = await _generate(client, base, profile, name)
                if problem is None:
                    proven.append(name)
                else:
                    problems.append(problem)
    except Refusal as refusal:
        problems.append(refusal.problem)
    return PodProof(pod=pod, address=f"{ip}:{port}", method=method, proven=tuple(proven),
                    problems=tuple(problems), seconds=(clock() - start) if clock else 0.0)


def base_url(ip: str, port: int) -> str:
    return f"http://{_host(ip)}:{port}"


def _host(ip: str) -> str:
    return f"[{ip}]" if ":" in ip else ip


async def _health(client: httpx.AsyncClient, base: str, profile: Profile) -> None:
    if profile.health_path is None:
        return
    status, _ = await call(client, "GET", base + profile.health_path)
    if status == 404:
        return  # no such endpoint on this build: not a verdict on health
    if status >= 500:
        raise Refusal(Problem("unhealthy", f"GET {profile.health_path} answered {status} (loading or dead)",
                              retryable=True, status=status))


async def models(client: httpx.AsyncClient, base: str) -> list[dict[str, Any]]:
    """The model cards of GET /v1/models (the mappings of its `data` list); a Refusal when there are none."""
    status, body = await call(client, "GET", base + "/v1/models")
    if status != 200:
        raise Refusal(Problem("http_status", f"GET /v1/models answered {status}", retryable=status >= 500,
                              status=status))
    data = json_of(body, "/v1/models")
    cards = data.get("data") if isinstance(data, dict) else None
    if not isinstance(cards, list):
        raise Refusal(Problem("bad_json", "GET /v1/models: no `data` list in the answer", retryable=True))
    return [card for card in cards if isinstance(card, dict)]


async def identify(client: httpx.AsyncClient, *, ip: str, port: int, engine: str) -> Problem | None:
    """Who answers at this address, by its /v1/models cards' `owned_by`: None when it is the plan's engine (or the
    kind names no owner of its own), else the problem (a transport failure too)."""
    if ENGINES[engine].owned_by is None:
        return None
    try:
        cards = await models(client, base_url(ip, port))
    except Refusal as refusal:
        # candle-vllm before 0.4.0 has no /v1/models: who answers cannot be told (docs/engines.md)
        return None if refusal.problem.status == 404 else refusal.problem
    return answered_by(engine, {card["owned_by"] for card in cards if isinstance(card.get("owned_by"), str)})


def generation_body(profile: Profile, name: str, *, max_tokens: int = 1, stream: bool = False) -> dict[str, Any]:
    body: dict[str, Any] = {"model": name, "max_tokens": max_tokens, "temperature": 0, "stream": stream}
    if profile.chat:
        body["messages"] = [{"role": "user", "content": "ping"}]
    else:
        body["prompt"] = "ping"
    return body


async def generate(client: httpx.AsyncClient, base: str, profile: Profile, name: str, *,
                   max_tokens: int = 1) -> Problem | None:
    """One short generation; None when it answered with a token, else the problem (a transport failure too)."""
    try:
        return await _generate(client, base, profile, name, max_tokens=max_tokens)
    except Refusal as refusal:
        return dataclasses.replace(refusal.problem, name=name)


async def _generate(client: httpx.AsyncClient, base: str, profile: Profile, name: str, *,
                    max_tokens: int = 1) -> Problem | None:
    status, body = await call(client, "POST", base + profile.generate_path,
                              json=generation_body(profile, name, max_tokens=max_tokens))
    if status in (400, 404):
        return Problem("name_rejected", f"{name!r} rejected with {status} by {profile.generate_path}",
                       retryable=False, name=name, status=status)
    if status != 200:
        return Problem("http_status", f"{profile.generate_path} answered {status} for {name!r}",
                       retryable=status >= 500 or status == 429, name=name, status=status)
    try:
        data = json_of(body, profile.generate_path)
    except Refusal as refusal:
        return dataclasses.replace(refusal.problem, name=name)
    choices = data.get("choices") if isinstance(data, dict) else None
    usage = data.get("usage") if isinstance(data, dict) else None
    tokens = usage.get("completion_tokens") if isinstance(usage, dict) else None
    if not choices or not isinstance(tokens, int) or tokens < 1:
        return Problem("no_token", f"{profile.generate_path} for {name!r} returned no completion token",
                       retryable=True, name=name)
    return None


async def metrics(client: httpx.AsyncClient, base: str) -> str | None:
    """The engine's /metrics in Prometheus' text format; None when it has none (404)."""
    status, body = await call(client, "GET", f"{base}/metrics")
    if status == 404:
        return None
    if status != 200:
        raise Refusal(Problem("http_status", f"GET /metrics answered {status}", retryable=True, status=status))
    return body.decode("utf-8", errors="replace")


def json_of(body: bytes, what: str) -> Any:
    try:
        return json.loads(body)
    except ValueError:
        raise Refusal(Problem("bad_json", f"{what}: the answer is not JSON ({body[:40]!r}...)",
                              retryable=True)) from None


async def call(client: httpx.AsyncClient, method: str, url: str, **kwargs: Any) -> tuple[int, bytes]:
    """One request with the body read up to BODY_CAP, whole within `requestTimeout` (docs/fitness.md: each request runs
    to its answer or requestTimeout): httpx's timeout bounds each read, so an answer dripped a byte a second would
    otherwise never end. Transport failures become classified refusals."""
    path = httpx.URL(url).path
    async with classified(method, path, deadline(client)), client.stream(method, url, **kwargs) as response:
        try:  # the raw bytes, inflated here under the cap (core.bounded): httpx would inflate a chunk whole
            body = await bounded.collect(response.aiter_raw(), cap=BODY_CAP,
                                         content_encoding=response.headers.get("content-encoding", ""))
        except bounded.TooLarge:
            raise Refusal(Problem("too_large", f"{method} {path}: body above {BODY_CAP} bytes",
                                  retryable=False, status=response.status_code)) from None
        except bounded.BadEncoding as exc:
            raise Refusal(Problem("bad_encoding", f"{method} {path}: {exc}", retryable=True)) from None
        return response.status_code, body


def deadline(client: httpx.AsyncClient) -> float:
    return client.timeout.read or DEFAULT_DEADLINE


@contextlib.asynccontextmanager
async def classified(method: str, path: str, seconds: float) -> AsyncIterator[None]:
    """Within `seconds` as a whole, and every transport failure as a `Refusal` with its kind."""
    try:
        # a hair later than httpx's own connect and read timeouts, which name what stalled more precisely
        async with asyncio.timeout(seconds + 0.05):
            yield
    except TimeoutError as exc:
        raise Refusal(Problem("read_timeout", f"{method} {path}: no whole answer within {seconds:g}s",
                              retryable=True)) from exc
    except httpx.ConnectTimeout as exc:
        raise Refusal(Problem("connect_timeout", f"{method} {path}: connect timed out", retryable=True)) from exc
    except httpx.ConnectError as exc:
        kind = "refused" if _is_refused(exc) else "connect_error"
        raise Refusal(Problem(kind, f"{method} {path}: connection {kind.replace('_', ' ')}",
                              retryable=True)) from exc
    except httpx.TimeoutException as exc:
        raise Refusal(Problem("read_timeout", f"{method} {path}: no answer in time", retryable=True)) from exc
    except httpx.DecodingError as exc:  # e.g. a gzip body cut short: the engine (or a proxy) misspoke
        raise Refusal(Problem("bad_encoding", f"{method} {path}: the body cannot be decoded "
                                              f"({type(exc).__name__})", retryable=True)) from exc
    except (httpx.ReadError, httpx.RemoteProtocolError, httpx.WriteError) as exc:
        raise Refusal(Problem("reset", f"{method} {path}: connection reset", retryable=True)) from exc


def _is_refused(exc: BaseException) -> bool:
    while exc is not None:
        if isinstance(exc, ConnectionRefusedError) or getattr(exc, "errno", None) == errno.ECONNREFUSED:
            return True
        if "refused" in str(exc).lower():
            return True
        exc = exc.__cause__ or exc.__context__  # type: ignore[assignment]
    return False


def new_client(*, timeout: float, fresh: bool = False) -> httpx.AsyncClient:
    # trust_env=False: a proxy set for the Job's egress must not carry traffic meant for pod IPs. Identity asked:
    # what comes compressed anyway is inflated under the cap (`call`, core.bounded). `fresh`: a connection of its
    # own for each request, as through a Service after a switch, where a kept-alive one may still lead to the old
    # pods (kubernetes#38456): kube-proxy chooses an endpoint per connection.
    limits = httpx.Limits(max_keepalive_connections=0) if fresh else httpx.Limits()
    return httpx.AsyncClient(timeout=httpx.Timeout(timeout), trust_env=False, follow_redirects=False,
                             headers={"Accept-Encoding": "identity"}, limits=limits)
