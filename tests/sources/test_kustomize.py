"""Finding and running real kustomize: `kustomize build`, else `kubectl kustomize`, else a clear error; a build
that fails or hangs says so; the output is opened into objects (a `kind: List` into its items)."""

from __future__ import annotations

import http.server
import os
import shutil
import threading
from pathlib import Path

import pytest

from cutover.sources import kustomize_build


def bin_with(tmp_path: Path, *names: str) -> str:
    """A PATH holding only programs of these names, each a link to the real tool or a script of ours."""
    folder = tmp_path / "bin"
    folder.mkdir(parents=True, exist_ok=True)
    for name in names:
        target = folder / name
        real = shutil.which("kubectl")
        if name in ("kubectl", "kustomize") and real:
            target.symlink_to(real)
        else:
            target.write_text("#!/bin/sh\nexit 0\n")
            target.chmod(0o755)
    return str(folder)


def test_kustomize_first_then_kubectl_then_nothing(tmp_path: Path) -> None:
    assert kustomize_build.command({"PATH": bin_with(tmp_path / "a", "kustomize", "kubectl")}) == ("kustomize", "build")
    assert kustomize_build.command({"PATH": bin_with(tmp_path / "b", "kubectl")}) == ("kubectl", "kustomize")


def test_without_either_a_clear_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    assert kustomize_build.command() is None
    with pytest.raises(kustomize_build.InvalidInput) as caught:
        kustomize_build.require()
    assert caught.value.cause == "kustomize_missing" and "kubectl" in caught.value.hint


def test_an_explicit_binary(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", bin_with(tmp_path, "kustomize-5.5"))
    assert kustomize_build.command({"CUTOVER_KUSTOMIZE": "kustomize-5.5", "PATH": os.environ["PATH"]}) == (
        "kustomize-5.5", "build")


async def test_a_build_kustomize_refuses_is_render_failed(tmp_path: Path) -> None:
    (tmp_path / "kustomization.yaml").write_text("resources: [missing.yaml]\n")
    with pytest.raises(kustomize_build.RenderFailed) as caught:
        await kustomize_build.build(tmp_path, where="overlays/prod@main")
    assert caught.value.cause == "render_failed" and caught.value.exit_code == 2
    assert caught.value.message.startswith("overlays/prod@main: kustomize build failed:") and "missing.yaml" in \
        caught.value.message


@pytest.mark.parametrize("remote", [
    "https://github.com/acme/bases//llm?ref=v1",  # kustomize's git form over https (it runs git)
    "https://raw.githubusercontent.com/acme/bases/main/service.yaml",  # a file over HTTP
    "git@github.com:acme/bases.git//llm?ref=v1",  # over ssh
])
async def test_a_remote_resource_is_not_fetched(tmp_path: Path, remote: str) -> None:
    """What a render reads is the tree a reviewer saw (docs/security.md): a remote base goes nowhere (every request
    meets a proxy on the discard port that refuses it; ssh is `false`) and the build says why."""
    (tmp_path / "kustomization.yaml").write_text(f"resources:\n  - '{remote}'\n")
    with pytest.raises(kustomize_build.RenderFailed) as caught:
        await kustomize_build.build(tmp_path, where="overlays/prod@main")
    assert "names a remote resource, which cutover's render does not fetch" in caught.value.message, \
        caught.value.message
    assert "vendor the remote base" in caught.value.hint


async def test_a_remote_resource_on_this_machine_is_not_fetched_either(tmp_path: Path) -> None:
    """Go's HTTP client sends localhost and loopback addresses past any proxy, so the refusing proxy never saw
    them: a base two directories away naming a server on this machine was fetched and rendered. Refused before
    the build now; the server hears nothing."""
    heard: list[str] = []

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            heard.append(self.path)
            body = b"apiVersion: v1\nkind: ConfigMap\nmetadata: {name: fetched}\n"
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        (tmp_path / "base").mkdir()
        (tmp_path / "base" / "kustomization.yaml").write_text(
            f"resources:\n  - http://127.0.0.1:{server.server_address[1]}/cm.yaml\n")
        (tmp_path / "overlays" / "prod").mkdir(parents=True)
        (tmp_path / "overlays" / "prod" / "kustomization.yaml").write_text("resources:\n  - ../../base\n")
        with pytest.raises(kustomize_build.RenderFailed) as caught:
            await kustomize_build.build(tmp_path / "overlays" / "prod", where="overlays/prod@main")
    finally:
        server.shutdown()
        server.server_close()
    assert "names a remote resource, which cutover's render does not fetch" in caught.value.message
    assert heard == []


@pytest.mark.parametrize(("reference", "local"), [
    ("https://localhost:8443/x.yaml", True),
    ("http://api.localhost/x.yaml", True),
    ("https://[::1]:8443/x.yaml", True),
    ("git::https://user@127.0.0.2/repo.git//base", True),
    ("https://github.com/acme/bases//llm?ref=v1", False),  # meets the refusing proxy instead
    ("https://127.0.0.1.nip.io/x.yaml", False),  # a name: Go sends it to the proxy
])
def test_which_references_name_this_machine(tmp_path: Path, reference: str, local: bool) -> None:
    (tmp_path / "kustomization.yaml").write_text(f"patches:\n  - path: {reference}\n")
    assert (kustomize_build.loopback_reference(tmp_path) is not None) == local


async def test_a_build_that_hangs_is_cut_at_its_deadline(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    slow = tmp_path / "bin" / "kustomize"
    slow.parent.mkdir()
    slow.write_text("#!/bin/sh\nsleep 30\n")
    slow.chmod(0o755)
    monkeypatch.setenv("PATH", f"{slow.parent}:{os.environ['PATH']}")
    monkeypatch.setattr(kustomize_build, "BUILD_TIMEOUT", 0.2)
    with pytest.raises(kustomize_build.RenderFailed) as caught:
        await kustomize_build.build(tmp_path, where="overlays/prod@main")
    assert "did not finish within 0s" in caught.value.message or "did not finish" in caught.value.message


def test_documents_open_lists_and_read_json() -> None:
    text = ('{"apiVersion": "v1", "kind": "List", "items": [{"kind": "Service", "metadata": {"name": "a"}},'
            ' {"kind": "ConfigMap", "metadata": {"name": "b"}}]}\n---\n---\nkind: Secret\nmetadata: {name: c}\n')
    assert [doc["kind"] for doc in kustomize_build.documents(text, where="x")] == ["Service", "ConfigMap", "Secret"]
    with pytest.raises(kustomize_build.RenderFailed):
        kustomize_build.documents("kind: [unclosed\n", where="x")
