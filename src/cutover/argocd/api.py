"""The ArgoCD server's REST API (its gRPC gateway, `argocd.server`): a refresh, the manifests ArgoCD renders, and
ArgoCD's objects where the cluster a hook runs in does not hold them (a fleet's spoke cluster: docs/fleet.md).

`GET /api/v1/applications/{name}` and `GET /api/v1/applicationsets/{name}` read an Application and an
ApplicationSet; `?refresh=normal` asks for a refresh, so that cutover needs no write permission on the Application
(an ArgoCD account with `applications, get` will do; docs/security.md). `GET
/api/v1/applications/{name}/manifests?revision=` answers `repositoryManifestResponse`: the manifests the
repo-server renders for that revision, one JSON document a string; for a multi-source Application `revisions` and
`sourcePositions` (1-based) name the source. Operation ids and shapes: ArgoCD 3.6's swagger.json
(`ApplicationService_Get`, `ApplicationSetService_Get`, `ApplicationService_GetManifests`). Retried like the Git
hosts: 5xx, 429 and dropped connections, six attempts. Called by `sync` (refresh), the render check and
`Run.argocd_object`.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx
import structlog
import tenacity

from cutover import patience, trust
from cutover.core import bounded
from cutover.errors import ArgoCDError, ArgoCDUnavailable
from cutover.plan import ArgoCD, secrets

log = structlog.get_logger("cutover.argocd")

TIMEOUT = 30.0  # seconds per request; a render of a large chart takes a few
DEADLINE = 60.0  # seconds for one whole answer
ANSWER_CAP = 32 << 20  # bytes an answer may decode to: an Application's rendered manifests, well within the Job's 192Mi
TOKEN_ENV = "CUTOVER_ARGOCD_TOKEN"  # noqa: S105 -- the name of a variable, not a token

__all__ = ["ArgoCDApi", "token"]


def token(settings: ArgoCD) -> str | None:
    """The API token from argocd.tokenFile, else CUTOVER_ARGOCD_TOKEN; never logged."""
    if settings.token_file:
        return secrets.from_file(settings.token_file, field="argocd.tokenFile", cause="argocd_token_missing",
                                 hint="mount the ArgoCD account's token there")
    return secrets.from_env(TOKEN_ENV)


def _retrying() -> tenacity.AsyncRetrying:
    return tenacity.AsyncRetrying(retry=tenacity.retry_if_exception_type(ArgoCDUnavailable),
                                  wait=tenacity.wait_exponential_jitter(initial=1.0, max=16.0),
                                  stop=patience.bounded(tenacity.stop_after_attempt(6)), reraise=True,
                                  before_sleep=lambda state: log.warning(
                                      "argocd.retry", attempt=state.attempt_number, then="retry",
                                      error=str(state.outcome.exception() if state.outcome else "")))


class ArgoCDApi:
    def __init__(self, settings: ArgoCD, *, token: str | None,
                 transport: httpx.AsyncBaseTransport | None = None) -> None:
        assert settings.server is not None
        self.settings = settings
        headers = {"Accept": "application/json", "Accept-Encoding": "identity",
                   **({"Authorization": f"Bearer {token}"} if token else {})}
        self.client = httpx.AsyncClient(base_url=settings.server.rstrip("/"), headers=headers, timeout=TIMEOUT,
                                        transport=transport, trust_env=False, follow_redirects=False,
                                        verify=trust.context())  # SSL_CERT_FILE for a private CA

    @classmethod
    def connect(cls, settings: ArgoCD | None) -> ArgoCDApi | None:
        """The API, where the plan names a server; None otherwise."""
        if settings is None or settings.server is None:
            return None
        return cls(settings, token=token(settings))

    async def aclose(self) -> None:
        await self.client.aclose()

    def _app(self, suffix: str = "") -> str:
        return f"/api/v1/applications/{self.settings.application}{suffix}"

    async def operation_phase(self) -> str | None:
        """The phase of the Application's operation (Running while a sync runs), None when it has none."""
        body = await self._get(self._app(), params={"appNamespace": self.settings.namespace},
                               what="read the Application")
        state = ((body.get("status") or {}).get("operationState") or {}) if isinstance(body, dict) else {}
        phase = state.get("phase")
        return str(phase) if phase else None

    async def argocd_object(self, plural: str, namespace: str, name: str) -> dict[str, Any]:
        """An Application or an ApplicationSet as ArgoCD's API serves it (`ApplicationService_Get`,
        `ApplicationSetService_Get`: the object as the cluster ArgoCD runs in holds it), for a fleet's spoke cluster,
        whose Application lives on the hub (docs/fleet.md)."""
        where = "appsetNamespace" if plural == "applicationsets" else "appNamespace"
        return await self._get(f"/api/v1/{plural}/{name}", params={where: namespace},
                               what=f"read {plural} {namespace}/{name}")

    async def refresh(self) -> None:
        await self._get(self._app(), params={"refresh": "normal", "appNamespace": self.settings.namespace},
                        what="refresh the Application")

    async def manifests(self, revision: str, *, position: int | None = None) -> list[dict[str, Any]]:
        """What ArgoCD renders at `revision` (of the source at 0-based `position`, for a multi-source one)."""
        params: list[tuple[str, str]] = [("appNamespace", self.settings.namespace)]
        if position is None:
            params.append(("revision", revision))
        else:
            params += [("revisions", revision), ("sourcePositions", str(position + 1))]
        what = f"render the manifests of {revision[:12]}"
        body = await self._get(self._app("/manifests"), params=params, what=what)
        manifests = body.get("manifests") or ()
        if not isinstance(manifests, list) or not all(isinstance(one, str) for one in manifests):
            raise ArgoCDError(f"ArgoCD API: {what}: `manifests` is not a list of strings", cause="argocd_api_malformed",
                              hint="is argocd.server really argocd-server (not a proxy's page)?")
        return [_json(manifest.encode(), what=f"{what}, a manifest") for manifest in manifests]

    async def _get(self, url: str, *, params: Any, what: str) -> dict[str, Any]:
        async for attempt in _retrying():
            with attempt:
                try:
                    async with asyncio.timeout(DEADLINE):  # httpx's timeout bounds each read, not a dripped body
                        status, body = await self._read(url, params=params, what=what)
                except TimeoutError as exc:
                    raise ArgoCDUnavailable(f"ArgoCD API: {what}: no whole answer within {DEADLINE:g}s",
                                             hint="argocd-server answers too slowly; retried") from exc
                except httpx.TransportError as exc:
                    if (reason := trust.untrusted(exc)) is not None:
                        raise ArgoCDError(f"ArgoCD API: {what}: the server's TLS certificate is not trusted "
                                           f"({reason})", cause="argocd_tls",
                                           hint="set SSL_CERT_FILE to a bundle holding argocd-server's CA") from exc
                    raise ArgoCDUnavailable(f"ArgoCD API: {what}: {type(exc).__name__}",
                                             hint="check argocd.server and the Job's egress") from exc
                if status >= 500 or status == 429:
                    raise ArgoCDUnavailable(f"ArgoCD API answered {status} to {what}")
                if status in (401, 403):
                    raise ArgoCDError(f"ArgoCD API refused {what} ({status})",
                                       cause="argocd_api_forbidden",
                                       hint="the ArgoCD account needs `applications, get` on this Application's "
                                            "project; check argocd.tokenFile")
                if status != 200:
                    raise ArgoCDError(f"ArgoCD API answered {status} to {what}: "
                                       f"{body[:200].decode('utf-8', errors='replace')}", cause="argocd_api_error",
                                       hint="check argocd.application and argocd.namespace")
                return _json(body, what=what)
        raise AssertionError("unreachable")  # pragma: no cover

    async def _read(self, url: str, *, params: Any, what: str) -> tuple[int, bytes]:
        """The status and the body, decoded under ANSWER_CAP (core.bounded): httpx would inflate a chunk whole."""
        async with self.client.stream("GET", url, params=params) as response:
            try:
                body = await bounded.collect(response.aiter_raw(), cap=ANSWER_CAP,
                                             content_encoding=response.headers.get("content-encoding", ""))
            except (bounded.TooLarge, bounded.BadEncoding) as exc:
                raise ArgoCDError(f"ArgoCD API: {what}: {exc}", cause="argocd_api_malformed",
                                  hint=f"argocd-server's answer is over {ANSWER_CAP >> 20} MiB decoded or cannot be "
                                       "decoded; is argocd.server really argocd-server (not a proxy's page)?") from exc
            return response.status_code, body


def _json(body: bytes, *, what: str) -> dict[str, Any]:
    """The answer as a JSON object; anything else is a named cause, not an internal error."""
    try:
        answer = json.loads(body)
    except ValueError:
        answer = None
    if not isinstance(answer, dict):
        raise ArgoCDError(f"ArgoCD API: {what}: the answer is not a JSON object ({body[:60]!r})",
                          cause="argocd_api_malformed",
                          hint="is argocd.server really argocd-server (not a proxy's page)?")
    return answer
