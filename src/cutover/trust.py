"""Which certificate authorities cutover trusts over HTTPS, decided in one place.

Every outside HTTPS client (the Git hosting API, the ArgoCD API, Slack) verifies with one SSL context per CA set:
the bundle of `SSL_CERT_FILE` (or the directory `SSL_CERT_DIR`) when set, as OpenSSL and httpx read them, else
certifi's; plus `git.caFile` for the Git host, for GitHub Enterprise or a self-hosted GitLab behind a private CA
(docs/plan.md). Plain git gets the same through `GIT_SSL_CAINFO`. The clients run with `trust_env=False` (no proxy or
netrc from the environment), so this module is where the environment's CA settings are honoured.
"""

from __future__ import annotations

import os
import ssl
from collections.abc import Mapping

import certifi

from cutover.errors import InvalidInput

__all__ = ["context", "git_env", "untrusted"]

_contexts: dict[tuple[str | None, str | None, str | None], ssl.SSLContext] = {}


def context(ca_file: str | None = None, *, environ: Mapping[str, str] = os.environ) -> ssl.SSLContext:
    """The SSL context for a client, built once per CA set (building one reads the whole bundle: ~20 ms)."""
    key = (environ.get("SSL_CERT_FILE") or None, environ.get("SSL_CERT_DIR") or None, ca_file)
    if key not in _contexts:
        _contexts[key] = _build(*key)
    return _contexts[key]


def _build(cert_file: str | None, cert_dir: str | None, ca_file: str | None) -> ssl.SSLContext:
    made = ssl.create_default_context()  # verification on, hostnames checked, system defaults loaded
    if cert_file or cert_dir:
        _load(made, "SSL_CERT_FILE" if cert_file else "SSL_CERT_DIR", cafile=cert_file, capath=cert_dir)
    else:
        made.load_verify_locations(cafile=certifi.where())
    if ca_file:
        _load(made, "git.caFile", cafile=ca_file)
    return made


def _load(made: ssl.SSLContext, field: str, *, cafile: str | None, capath: str | None = None) -> None:
    where = cafile or capath
    try:
        made.load_verify_locations(cafile=cafile, capath=capath)
    except FileNotFoundError as exc:
        raise InvalidInput(f"{field} {where}: file not found", cause="ca_file",
                           hint="mount the CA bundle (PEM) at that path") from exc
    except ssl.SSLError as exc:  # an OSError too: first
        raise InvalidInput(f"{field} {where}: expected PEM certificates, found none that load ({exc.reason})",
                           cause="ca_file", hint="the file must hold -----BEGIN CERTIFICATE----- blocks") from exc
    except OSError as exc:
        raise InvalidInput(f"{field} {where}: cannot read: {exc.strerror}", cause="ca_file",
                           hint="mount the CA bundle (PEM) at that path") from exc


def git_env(ca_file: str | None, *, environ: Mapping[str, str] = os.environ) -> dict[str, str]:
    """What tells git (libcurl) the same: it reads neither SSL_CERT_FILE nor certifi, only its own settings."""
    if ca_file:
        context(ca_file, environ=environ)  # refuses a missing or broken file before git is started
        return {"GIT_SSL_CAINFO": ca_file}
    if environ.get("SSL_CERT_FILE"):
        return {"GIT_SSL_CAINFO": environ["SSL_CERT_FILE"]}
    if environ.get("SSL_CERT_DIR"):
        return {"GIT_SSL_CAPATH": environ["SSL_CERT_DIR"]}
    return {}


def untrusted(exc: BaseException) -> str | None:
    """The verification error behind a failed connection, if the server's certificate was not trusted: that
    is permanent until someone adds the CA, so it is not retried like a network error."""
    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, ssl.SSLCertVerificationError):
            return str(seen.verify_message or seen.reason or "certificate verify failed")
        if "CERTIFICATE_VERIFY_FAILED" in str(seen):
            return "certificate verify failed"
        seen = seen.__cause__ or seen.__context__
    return None
