"""Faults of the Git hosts (GitHub, Gitea/Forgejo, GitLab, plain Git over HTTPS), and payloads: what a host
hands back is input too (not YAML, no Service, a login page, 20 MiB, an alias bomb)."""

from __future__ import annotations

import base64
import json

from harness import (
    DOCS,
    FIXTURE,
    SWITCH,
    TOKEN,
    Case,
    Stage,
    Step,
    at,
    before_write,
    blob_sha,
    bombed,
    host_faults,
    moved_away,
    switch_to_candle,
    with_ca,
)

from cutover.demo.hosts import Fault
from cutover.demo.world import NAMESPACE, SERVICE

CASES = [
    # Git hosts
    Case("git", "GitHub 409 on the write", host_faults(Fault("PUT", 409)), saw=("git.conflict_retry",)),
    Case("git", "GitHub 422 validation failed", host_faults(Fault("PUT", 422, body={"message": "Invalid request."})),
         commits=(), steps=(Step(("run",), 5),), cause="git_rejected"),
    Case("git", "GitHub 429 with Retry-After", host_faults(Fault("PUT", 429, {"Retry-After": "30"})),
         saw=("git.retry",)),
    Case("git", "GitHub 403 rate limit, no Retry-After",
         host_faults(Fault("PUT", 403, {"x-ratelimit-remaining": "0", "x-ratelimit-reset": "0"},
                           body={"message": "API rate limit exceeded"})), saw=("git.retry",)),
    Case("git", "GitHub 502 on the write", host_faults(Fault("PUT", 502)), saw=("git.retry",)),
    Case("git", "GitHub 500 on reads", host_faults(Fault("GET", 500), Fault("GET", 500)), saw=("git.retry",)),
    Case("git", "connection dropped before the write", host_faults(Fault("PUT", 0, reset_connection=True)),
         saw=("git.retry",)),
    Case("git", "connection dropped after the write landed", host_faults(Fault("PUT", 0, after_write=True)),
         saw=("git.already",)),
    Case("git", "GitHub token expired (401)", host_faults(Fault("GET", 401)), commits=(),
         steps=(Step(("run",), 5),), cause="git_auth"),
    Case("git", "someone edits a comment while we write", before_write(Stage.docs_change),
         commits=(DOCS, SWITCH), saw=("git.conflict_retry",)),
    Case("git", "someone switches first", before_write(lambda stage: stage.other_commit(
        "ops: switch to candle", switch_to_candle)),
         commits=("ops: switch to candle",), saw=("git.already",)),
    Case("git", "someone selects a canary meanwhile", at("names.proven", lambda stage: stage.other_commit(
        "ops: canary", lambda text: text.replace("component: predictor", "component: canary"))),
         commits=("ops: canary",), steps=(Step(("run",), 5),), cause="git_conflict"),
    Case("git", "GitHub 307 on the write (a renamed repository)", host_faults(Fault(
        "PUT", 307, {"Location": "https://api.github.com/repositories/4711/contents/x?token=secret-in-the-url"})),
         commits=(), steps=(Step(("run",), 5),), cause="git_rejected"),
    Case("git", "GitHub 200 to the write without a commit", host_faults(Fault("PUT", 200, body={"content": {}})),
         commits=(), steps=(Step(("run",), 5),), cause="git_rejected"),
    Case("git", "GitHub says committed, the branch does not hold it", host_faults(Fault(
        "PUT", 200, body={"commit": {"sha": "d" * 40, "html_url": "https://github.com/x"}})),
         commits=(), steps=(Step(("run",), 5),), cause="git_rejected"),
    Case("git", "token with a trailing newline (echo'd into the Secret)",
         lambda stage: stage.env.update(CUTOVER_GIT_TOKEN=TOKEN + "\n")),
    Case("git", "Forgejo 422 stale sha", host_faults(Fault("PUT", 422, body={"message": "sha does not match"})),
         host="gitea", saw=("git.conflict_retry",)),
    Case("git", "Forgejo 500 on the write", host_faults(Fault("PUT", 500)), host="gitea", saw=("git.retry",)),
    Case("git", "Forgejo token revoked (401)", host_faults(Fault("GET", 401)), host="gitea", commits=(),
         steps=(Step(("run",), 5),), cause="git_auth"),
    Case("git", "GitLab 400 stale last_commit_id", host_faults(Fault("POST", 400, body={
        "message": "You are attempting to update a file that has changed since you started editing it."})),
        host="gitlab", saw=("git.conflict_retry",)),
    Case("git", "GitLab 429 with Retry-After", host_faults(Fault("POST", 429, {"Retry-After": "10"})),
         host="gitlab", saw=("git.retry",)),
    Case("git", "GitLab token expired (401)", host_faults(Fault("GET", 401)), host="gitlab", commits=(),
         steps=(Step(("run",), 5),), cause="git_auth"),
    Case("git", "plain git: push rejected, someone pushed", before_write(Stage.docs_change), host="git",
         commits=(DOCS, SWITCH), saw=("git.conflict_retry",)),
    Case("git", "plain git: server 503", lambda stage: setattr(stage.host, "fail_next", [503]), host="git",
         saw=("git.retry",)),
    Case("git", "plain git: wrong token", lambda stage: stage.env.update(CUTOVER_GIT_TOKEN="glpat-" + "W" * 24),
         host="git", commits=(), steps=(Step(("run",), 5),), cause="git_auth"),
    Case("git", "plain git: the origin redirects to another host", moved_away, host="git", commits=(),
         steps=(Step(("run",), 5),), cause="git_redirect"),
    Case("git", "GitHub behind a private CA, trusted through git.caFile", host="github+tls", plan=with_ca()),
    Case("git", "GitHub behind a private CA, no git.caFile", host="github+tls", commits=(),
         steps=(Step(("run",), 5),), cause="git_tls", unseen=("git.retry",)),
    Case("git", "plain git behind a private CA, trusted through git.caFile", host="git+tls", plan=with_ca()),
    Case("git", "plain git behind a private CA, no git.caFile", host="git+tls", commits=(),
         steps=(Step(("run",), 5),), cause="git_tls", unseen=("git.retry",)),
    Case("payload", "git.caFile names no file", plan=with_ca("/nonexistent/ca.pem"), commits=(),
         steps=(Step(("run",), 2),), cause="ca_file"),
    # payloads: what the APIs hand back is input too
    Case("payload", "the file in Git is not YAML", at("lock.acquired", lambda stage: stage.other_commit(
        "ops: oops", lambda text: text.replace("  selector:", "  selector: [oops"))), commits=("ops: oops",),
        steps=(Step(("run",), 2),), cause="invalid_file"),
    Case("payload", "the file in Git lost the Service", lambda stage: stage.other_commit(
        "ops: move the Service", lambda text: text.replace("kind: Service", "kind: ConfigMap")),
        commits=("ops: move the Service",), steps=(Step(("run",), 2),), cause="document_not_found"),
    Case("payload", "GitHub answers a read without content", host_faults(Fault("GET", 200, body={"sha": "x"})),
         commits=(), steps=(Step(("run",), 5),), cause="git_not_found"),
    Case("payload", "GitHub answers a read with a directory", host_faults(Fault("GET", 200, body=[{"name": "a"}])),
         commits=(), steps=(Step(("run",), 5),), cause="git_not_found"),
    Case("payload", "an alias bomb in the Service file", lambda stage: stage.other_commit("ops: bomb", bombed),
         commits=("ops: bomb",), steps=(Step(("run",), 2),), cause="selector_alias"),
    Case("payload", "a 2 MiB Service file", lambda stage: stage.other_commit(
        "ops: huge", lambda text: text + "# " + "x" * (2 << 20) + "\n"), commits=("ops: huge",),
        steps=(Step(("run",), 2),), cause="invalid_file"),
    Case("payload", "nesting 10,000 deep in the file", lambda stage: stage.other_commit(
        "ops: deep", lambda text: text + "---\ndeep: " + "[" * 10000 + "]" * 10000 + "\n"), commits=("ops: deep",),
        steps=(Step(("run",), 2),), cause="invalid_file"),
    Case("payload", "the file in Git is not UTF-8", host_faults(Fault("GET", 200, body={
        "type": "file", "encoding": "base64", "sha": "f" * 40, "content": base64.b64encode(
            FIXTURE.encode("latin-1", errors="replace") + b"\xff\xfe").decode()})),
        commits=(), steps=(Step(("run",), 2),), cause="invalid_file"),
    Case("payload", "GitHub answers a login page (HTML)", host_faults(Fault(
        "GET", 200, {"Content-Type": "text/html"}, raw=b"<html><body>Sign in to your proxy</body></html>")),
        commits=(), steps=(Step(("run",), 5),), cause="git_rejected"),
    Case("payload", "GitHub pads a good answer to 20 MiB", host_faults(Fault("GET", 200, raw=json.dumps({
        "type": "file", "encoding": "base64", "sha": blob_sha(FIXTURE), "content": base64.b64encode(
            FIXTURE.encode()).decode()}).encode() + b" " * (20 << 20), headers={"Content-Type": "application/json"})),
        commits=(), steps=(Step(("run",), 5),), cause="git_rejected"),
    Case("git", "GitHub drips an answer a byte a second", host_faults(Fault("GET", 200, drip=True)),
         saw=("git.retry",)),  # cut at the whole-answer deadline and asked again
    Case("payload", "GitHub answers content that is not base64", host_faults(Fault("GET", 200, body={
        "type": "file", "encoding": "base64", "sha": "f" * 40, "content": "not*base64!"})),
        commits=(), steps=(Step(("run",), 5),), cause="git_rejected"),
    Case("payload", "the plan's Service does not exist", lambda stage: stage.world.kube.remove(
        "/v1/services", NAMESPACE, SERVICE), commits=(), steps=(Step(("run",), 2),), cause="service_not_found"),
]
