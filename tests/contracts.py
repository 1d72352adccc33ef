"""Validate what the doubles receive and hold against official descriptions: requests to the Git host fakes (the
hosts' OpenAPI), and every Application the emulated API server stores (ArgoCD 3.6's Application CRD schema)."""

from __future__ import annotations

import functools
import gzip
import json
import re
from pathlib import Path
from typing import Any
from urllib.parse import quote, unquote

import jsonschema
from aiohttp import web
from openapi_core import Config, OpenAPI
from openapi_core.datatypes import RequestParameters
from ruamel.yaml import YAML

SPECS = Path(__file__).resolve().parent / "openapi"


@functools.cache
def spec(name: str) -> OpenAPI:
    """`github` (api.github.com) or `forgejo` (16.0.1, OpenAPI 3), parsed once per test session."""
    files = {"github": "github-api.github.com.json.gz", "forgejo": "forgejo-16.0.1-oas3.json.gz"}
    loaded = json.loads(gzip.decompress((SPECS / files[name]).read_bytes()))
    return OpenAPI.from_dict(loaded, config=Config(spec_validator_cls=None))


# Path templates whose last parameter holds slashes (a file path, a ref such as heads/main, a branch).
SLASHED = ("/contents/", "/git/ref/", "/git/refs/", "/branches/")


class _Request:
    """openapi-core's request protocol over an aiohttp request, with a `/`-holding path parameter
    %2F-encoded so that it matches `{path}` in the templates."""

    def __init__(self, request: web.Request, body: bytes, host_url: str) -> None:
        self.host_url = host_url
        path = request.path
        for marker in SLASHED:
            head, found, rest = path.partition(marker)
            if found and rest:
                path = f"{head}{marker}{quote(unquote(rest), safe='')}"
                break
        self.path = path
        self.method = request.method.lower()
        self.body = body or None
        self.content_type = request.content_type if body else "application/json"
        self.parameters = RequestParameters(query=request.query, header=request.headers, cookie=request.cookies)


class Recorder:
    """A fake's validator: keeps every violation for the test to assert on."""

    def __init__(self, spec: OpenAPI, host_url: str) -> None:
        self.spec, self.host_url = spec, host_url
        self.violations: list[str] = []
        self.checked = 0

    def __call__(self, request: web.Request, body: bytes) -> None:
        self.checked += 1
        try:
            self.spec.validate_request(_Request(request, body, self.host_url))
        except Exception as exc:
            self.violations.append(f"{request.method} {request.path_qs}: {type(exc).__name__}: {exc}")

    def assert_clean(self) -> Any:
        assert self.checked > 0
        assert self.violations == [], "\n".join(self.violations)


@functools.cache
def crd_validator(name: str) -> jsonschema.protocols.Validator:
    """The served version's openAPIV3Schema of an ArgoCD CRD (`application`, `appproject` or `applicationset`), as
    the API server validates custom resources with it (unknown `x-kubernetes-*` keywords are ignored, as JSON Schema
    does)."""
    (path,) = SPECS.glob(f"argocd-*-{name}-crd.yaml.gz")
    crd = YAML(typ="safe").load(gzip.decompress(path.read_bytes()))
    (version,) = [v for v in crd["spec"]["versions"] if v.get("served")]
    schema = version["schema"]["openAPIV3Schema"]
    validator: jsonschema.protocols.Validator = jsonschema.Draft7Validator(schema)
    return validator


def check_application(obj: Any) -> None:
    """Refuse an Application the real API server would refuse: what a test world writes must be real."""
    errors = sorted(crd_validator("application").iter_errors(obj), key=lambda error: list(error.path))
    assert not errors, "; ".join(f"{'.'.join(map(str, error.path)) or '(root)'}: {error.message}"
                                 for error in errors[:5])


@functools.cache
def argocd_swagger() -> dict[str, Any]:
    """ArgoCD 3.6's server API (Swagger 2.0, generated from its gRPC gateway)."""
    loaded: dict[str, Any] = json.loads(gzip.decompress((SPECS / "argocd-3.6.0-swagger.json.gz").read_bytes()))
    return loaded


def _operation(method: str, path: str) -> tuple[str, dict[str, Any]] | None:
    for template, operations in argocd_swagger()["paths"].items():
        pattern = "^" + "".join(f"(?P<{part[1:-1].replace('.', '_')}>[^/]+)" if part.startswith("{") else
                                 re.escape(part) for part in re.split(r"(\{[^}]+\})", template)) + "$"
        if re.match(pattern, path) and method.lower() in operations:
            return template, operations[method.lower()]
    return None


class SwaggerRecorder:
    """The ArgoCD API double's validator: every request's path, method and query parameters against the
    operation ArgoCD declares, and every answer against the operation's response schema."""

    def __init__(self) -> None:
        self.violations: list[str] = []
        self.checked = 0

    def request(self, method: str, path: str, query: Any) -> None:
        self.checked += 1
        found = _operation(method, path)
        if found is None:
            self.violations.append(f"{method} {path}: no such operation in ArgoCD's API")
            return
        template, operation = found
        declared = {param["name"]: param for param in operation.get("parameters", []) if param.get("in") == "query"}
        for name in query:
            param = declared.get(name)
            if param is None:
                self.violations.append(f"{method} {template}: unknown query parameter {name!r}")
            elif param.get("type") == "boolean" and query[name] not in ("true", "false"):
                self.violations.append(f"{method} {template}: {name}={query[name]!r} is no boolean")
            elif param.get("type") != "array" and len(query.getall(name)) > 1:
                self.violations.append(f"{method} {template}: {name} given twice")

    def response(self, method: str, path: str, status: int, body: Any) -> None:
        found = _operation(method, path)
        if found is None:
            return
        responses = found[1]["responses"]
        schema = (responses.get(str(status)) or responses.get("default") or {}).get("schema")
        if schema is None:
            return
        validator = jsonschema.Draft4Validator({**schema, "definitions": argocd_swagger()["definitions"]})
        self.violations += [f"{method} {path} answered {status}: {error.message}"
                            for error in validator.iter_errors(body)][:5]

    def assert_clean(self) -> None:
        assert self.checked > 0
        assert self.violations == [], "\n".join(self.violations)
