"""Where a credential may go is the Secret's word, not the plan's (docs/security.md): in a pod, the Git token
reaches only the repository, branches and files its Secret names, ArgoCD's token only the server its Secret names,
commits are signed by cutover or the Secret's author; everything else is exit 2 `credential_unbound`, naming the
plan key and the Secret key, before any request. And the edit is the plan's own Service's selector, nothing else."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from cutover import plan
from cutover.errors import ExitCode, InvalidInput
from cutover.plan import credentials, secrets
from cutover.plan.credentials import Bounds
from cutover.plan.model import GitAuthor
from plans import GOOD, edit

(PLAN,) = plan.parse(GOOD)
BOUND = Bounds(git_credential=True, repository=PLAN.git.url.removesuffix(".git") + "/",
               paths=("k8s/**", "*.yaml"), argocd_credential=True)


def test_a_plan_within_the_secrets_bounds_is_taken_with_cutovers_own_author() -> None:
    assert credentials.check(PLAN, dataclasses.replace(BOUND, paths=(PLAN.git.path,))) == PLAN
    signed = credentials.check(PLAN, dataclasses.replace(BOUND, paths=("**",), author=GitAuthor("Ops", "o@acme.io")))
    assert signed.git.author == GitAuthor("Ops", "o@acme.io")  # the Secret's author, the plan naming none
    # no credential in the Git Secret, nothing to send anywhere: nothing to bound
    assert credentials.check(PLAN, Bounds()) == PLAN


@pytest.mark.parametrize(("why", "changed", "bounds", "keys"), [
    ("a Secret that names no repository", {}, Bounds(git_credential=True), ("git.url", "cutover-git/repository")),
    ("the Git token sent to another host", {"url": "https://evil.example/acme/gitops.git"}, BOUND,
     ("git.url", "cutover-git/repository")),
    ("another repository of the same host", {"url": "https://github.com/acme/other.git"}, BOUND,
     ("git.url", "cutover-git/repository")),
    ("a branch the Secret does not name", {"branch": "release"}, BOUND, ("git.branch", "cutover-git/branches")),
    ("another team's file", {"path": "teams/platform/namespace.yaml"}, BOUND, ("git.path", "cutover-git/paths")),
    ("an API host the Secret does not list", {"api_url": "https://collector.example/api"},
     dataclasses.replace(BOUND, paths=("**",)),
     ("git.apiUrl", "cutover-git/apiHosts")),
    ("someone else as the author", {"author": GitAuthor("Release Bot", "bot@acme.io")},
     dataclasses.replace(BOUND, paths=("**",)), ("git.author", "cutover-git/author")),
])
def test_a_plan_that_goes_beyond_the_secret_is_refused_by_both_keys(why: str, changed: dict[str, object],
                                                                   bounds: Bounds, keys: tuple[str, str]) -> None:
    bad = dataclasses.replace(PLAN, git=dataclasses.replace(PLAN.git, **changed))  # type: ignore[arg-type]
    with pytest.raises(InvalidInput) as caught:
        credentials.check(bad, bounds)
    assert caught.value.cause == "credential_unbound" and caught.value.exit_code == ExitCode.INVALID_INPUT, why
    assert caught.value.message.startswith(f"{keys[0]}: ") and f"({keys[1]})" in caught.value.message, why


def test_a_fleets_cluster_reads_with_a_token_that_may_write_nothing() -> None:
    """docs/fleet.md: a fleet's cluster commits nothing, so its Secret needs no `paths` (a read-only token) and its
    plan's files need not be among them; where the token goes is bounded as for any plan."""
    fleet = dataclasses.replace(PLAN, fleet=True, target="", rollback_auto=False)
    read_only = dataclasses.replace(BOUND, paths=())
    assert credentials.check(fleet, read_only) == fleet
    assert credentials.check(dataclasses.replace(fleet, git=dataclasses.replace(fleet.git, path="elsewhere/x.yaml")),
                             BOUND).fleet
    with pytest.raises(InvalidInput, match=r"\(cutover-git/paths\)"):
        credentials.check(PLAN, read_only)  # a single cluster's writes: its files, named
    with pytest.raises(InvalidInput, match=r"\(cutover-git/repository\)"):
        credentials.check(dataclasses.replace(fleet, git=dataclasses.replace(
            fleet.git, url="https://evil.example/acme/gitops.git")), read_only)


def test_the_argocd_token_goes_only_to_the_server_its_secret_names() -> None:
    assert PLAN.argocd is not None
    served = dataclasses.replace(PLAN, argocd=dataclasses.replace(PLAN.argocd, server="https://argocd.internal"))
    ok = dataclasses.replace(BOUND, paths=("**",), argocd_server="https://argocd.internal/")
    assert credentials.check(served, ok) == served
    for bounds in (dataclasses.replace(ok, argocd_server=None), dataclasses.replace(ok, argocd_server="https://x")):
        with pytest.raises(InvalidInput, match=r"^argocd\.server: .*\(cutover-argocd/server\)"):
            credentials.check(served, bounds)


def test_the_bounds_are_read_from_the_mounted_secrets(tmp_path: Path) -> None:
    (tmp_path / "git").mkdir()
    (tmp_path / "argocd").mkdir()
    for name, text in {"git/token": "t\n", "git/repository": "https://github.com/acme/gitops.git\n",
                       "git/branches": "main\nrelease-*\n",
                       "git/paths": "# where cutover writes\nk8s/**, apps/*.yaml\n",
                       "git/author": "Ops Bot <ops@acme.io>\n", "argocd/server": "https://argocd.internal\n"}.items():
        (tmp_path / name).write_text(text)
    found = credentials.read(tmp_path)
    assert found == Bounds(git_credential=True, repository="https://github.com/acme/gitops.git",
                           branches=("main", "release-*"), paths=("k8s/**", "apps/*.yaml"),
                           author=GitAuthor("Ops Bot", "ops@acme.io"), argocd_server="https://argocd.internal")
    assert credentials.read(tmp_path / "nothing") == Bounds()
    (tmp_path / "git" / "author").write_text("ops@acme.io\n")
    with pytest.raises(InvalidInput, match="cutover-git/author: expected `Name <email>`"):
        credentials.read(tmp_path)


def test_in_a_pod_nothing_in_its_environment_widens_where_credentials_are_read(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "10.96.0.1")
    monkeypatch.setenv("CUTOVER_SECRETS_DIR", "/var/run/secrets")  # would let tokenFile name the API token
    assert secrets.secrets_dir() == secrets.SECRETS_DIR
    with pytest.raises(InvalidInput, match=r"git\.tokenFile: expected /var/run/secrets/cutover/git/token "):
        plan.parse(GOOD.replace("/var/run/secrets/cutover/git/token",
                                "/var/run/secrets/kubernetes.io/serviceaccount/token"))
    # one Secret's file as another's credential: the Git token sent as ArgoCD's
    with pytest.raises(InvalidInput, match=r"argocd\.tokenFile: expected /var/run/secrets/cutover/argocd/token "):
        plan.parse(GOOD.replace("argocd:\n", "argocd:\n  tokenFile: /var/run/secrets/cutover/git/token\n", 1))
    # the review's N1: a key of the Git Secret mounted under another name (`items:`) and named as the token
    with pytest.raises(InvalidInput, match=r"git\.tokenFile: expected /var/run/secrets/cutover/git/token \(in a pod"):
        plan.parse(GOOD.replace("/var/run/secrets/cutover/git/token", "/var/run/secrets/cutover/git/t"))
    (one,) = plan.parse(GOOD.replace("/var/run/secrets/cutover/git/token", "/var/run/secrets/cutover/git/./token"))
    assert one.git.token_file == "/var/run/secrets/cutover/git/token"
    # the review's N6: a trust anchor from the plan's own ConfigMap would let its writers read the token on the way
    with pytest.raises(InvalidInput, match=r"git\.caFile: expected /var/run/secrets/cutover/git/ca\.crt "):
        plan.parse(GOOD.replace("  tokenFile:", "  caFile: /etc/cutover/ca.crt\n  tokenFile:", 1))
    (trusting,) = plan.parse(GOOD.replace("  tokenFile:", "  caFile: /var/run/secrets/cutover/git/ca.crt\n"
                                                          "  tokenFile:", 1))
    assert trusting.git.ca_file == "/var/run/secrets/cutover/git/ca.crt"


def mount(root: Path, secret: str, files: dict[str, str]) -> None:
    """A Secret's mount as the kubelet writes it: the files in a `..<timestamp>` directory, `..data` pointing at it,
    and each key a link through `..data`."""
    stamp = root / secret / "..2026_12_06_22_00_00.000000001"
    stamp.mkdir(parents=True)
    for name, text in files.items():
        (stamp / name).write_text(text)
    (root / secret / "..data").symlink_to(stamp.name)
    for name in files:
        (root / secret / name).symlink_to(f"..data/{name}")


GIT_MOUNT = {"token": "ghp_" + "a" * 36, "repository": PLAN.git.url + "\n", "paths": PLAN.git.path + "\n"}


def test_in_a_pod_a_key_no_bound_covers_or_bounds_left_out_refuse_the_token(tmp_path: Path) -> None:
    """A mount that renames a key (`items: [{key: token, path: t}]`) or adds one holds a file cutover reads nothing
    from; a mount that leaves `paths` out would widen the token to every file: in a pod both are refused before
    any request (off a pod, a person's own directory keeps `paths` optional)."""
    (served,) = plan.parse(GOOD)
    mount(tmp_path, "git", GIT_MOUNT)
    assert credentials.check(served, credentials.read(tmp_path, in_pod=True)).git == served.git
    renamed = tmp_path / "renamed"
    mount(renamed, "git", {**{k: v for k, v in GIT_MOUNT.items() if k != "token"}, "t": GIT_MOUNT["token"]})
    mount(renamed, "argocd", {"token": "x" * 20, "server": "https://argocd.internal"})
    found = credentials.read(renamed, in_pod=True)
    assert found.strays == ("git/t",) and not found.git_credential
    with pytest.raises(InvalidInput, match=r"hold git/t, which is no key cutover reads") as caught:
        credentials.check(served, found)
    assert caught.value.cause == "credential_unbound"
    unbounded = tmp_path / "unbounded"
    mount(unbounded, "git", {k: v for k, v in GIT_MOUNT.items() if k != "paths"})
    with pytest.raises(InvalidInput, match=r"^git\.path: the Secret cutover-git names no files .*cutover-git/paths"):
        credentials.check(served, credentials.read(unbounded, in_pod=True))
    assert credentials.read(unbounded).paths == ("**",)  # a person's machine: as before


def test_every_file_of_the_secrets_but_their_bounds_is_hidden_whatever_its_name(tmp_path: Path) -> None:
    """Forgejo's 40-hex tokens, GitLab's deploy tokens and passwords have no shape to catch: what the mounts hold
    is hidden by value, a renamed key included; the bounds, read in every log line, are not."""
    mount(tmp_path, "git", {**GIT_MOUNT, "t": "0123456789abcdef0123456789abcdef01234567\n",
                            "ssh-privatekey": "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAA\n"})
    mount(tmp_path, "slack", {"token": "hunter2hunter2"})
    values = credentials.secret_values(tmp_path)
    assert {"0123456789abcdef0123456789abcdef01234567", GIT_MOUNT["token"], "hunter2hunter2",
            "b3BlbnNzaC1rZXktdjEAAAAA"} <= set(values)
    assert not {PLAN.git.url, PLAN.git.path} & set(values)


@pytest.mark.parametrize(("old", "new", "key"), [
    ("document: {kind: Service, name: reasoning-long-predictor}", "document: {kind: Namespace, name: team-a}",
     "git.document.kind"),
    ("document: {kind: Service, name: reasoning-long-predictor}", "document: {kind: Service, name: other-team}",
     "git.document.name"),
    ("  selectorPath: spec.selector\n", "  selectorPath: metadata.labels\n", "git.selectorPath"),
])
def test_the_edit_is_the_plans_own_service_selector(old: str, new: str, key: str) -> None:
    assert old in GOOD
    with pytest.raises(InvalidInput, match=rf": {key}: expected "):
        plan.parse(edit(old, new))


@pytest.mark.parametrize("api_url", ["http://api.github.com:443", "https://api.github.com/repos/acme/other/contents/x?",
                                     "https://api.github.com/repos/acme/other", "https://api.github.com/api/v3/../x"])
def test_in_a_pod_the_api_url_is_an_https_root(api_url: str) -> None:
    """The review's N5: an apiUrl on an allowed host still chose the scheme (the token in clear) or a path and
    query of its own (a PUT outside `paths`)."""
    insecure = "true" if api_url.startswith("http:") else "false"
    (aimed,) = plan.parse(GOOD.replace("apiUrl: null\n", f"apiUrl: {api_url}\n", 1).replace(
        "allowInsecure: false\n", f"allowInsecure: {insecure}\n", 1))
    with pytest.raises(InvalidInput) as caught:
        credentials.check(aimed, dataclasses.replace(BOUND, paths=("**",)))
    assert caught.value.cause == "credential_unbound"
    (rooted,) = plan.parse(GOOD.replace("apiUrl: null\n", "apiUrl: https://api.github.com/\n", 1))
    assert credentials.check(rooted, dataclasses.replace(BOUND, paths=("**",))).git.api_url == "https://api.github.com/"


def test_the_slack_bot_posts_only_to_the_channels_its_secret_lists() -> None:
    """The review's N7: the bot token's channel was the plan's alone; `channels` in cutover-slack bounds it (none:
    any channel the bot was invited to, as before)."""
    (posting,) = plan.parse(GOOD.replace("    webhookFile: /var/run/secrets/cutover/slack/webhook\n",
                                         "    botTokenFile: /var/run/secrets/cutover/slack/token\n"
                                         "    channel: C0OTHER\n", 1))
    assert posting.slack is not None and posting.slack.channel == "C0OTHER"
    with pytest.raises(InvalidInput, match=r"^notify\.slack\.channel: .*\(cutover-slack/channels\)"):
        credentials.check(posting, Bounds(slack_channels=("C0OPS",)))
    assert credentials.check(posting, Bounds(slack_channels=("C0OPS", "C0OTHER"))) == posting
    assert credentials.check(posting, Bounds()) == posting
