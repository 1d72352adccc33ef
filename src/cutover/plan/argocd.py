"""The plan's `argocd:` section: the Application that syncs the Service, and its API when one is named."""

from __future__ import annotations

from cutover.plan.field import Field
from cutover.plan.git import check_url
from cutover.plan.model import ArgoCD
from cutover.plan.secrets import secret_file
from cutover.plan.service import dns_label, object_name


def read_argocd(node: Field, *, allow_insecure: bool, fleet: bool = False) -> ArgoCD:
    """`fleet`: a fleet's plan, shared by every cluster, may leave `application` out: each hook finds its own
    Application in the tracking ArgoCD writes on it (docs/fleet.md)."""
    node.mapping(("application", "namespace", "refresh", "server", "tokenFile"),
                 required=() if fleet else ("application",))
    server = node.child("server")
    if server.value is not None:  # plain http:// only with git.allowInsecure, as for the Git host
        check_url(server, server.string(), allow_insecure=allow_insecure, ssh_ok=False)
    namespace = node.child("namespace")
    refresh = _refresh(node.child("refresh"))
    return ArgoCD(
        # both go into API request paths (the Application, or the ArgoCD API's): names, nothing else
        application=object_name(node.child("application")) if node.present("application") else "",
        namespace=dns_label(namespace) if namespace.value is not None else "argocd",
        refresh=refresh is not False,
        refresh_always=refresh == "always",
        server=server.value,
        token_file=secret_file(node.child("tokenFile"), "argocd", "token"),
    )


def _refresh(field: Field) -> bool | str:
    """true (the default), false, or `always`: also while ArgoCD's operation runs, for an ArgoCD whose self-heal
    runs with the fixed delay (docs/install.md), where such a refresh is followed by a full sync, hooks and all."""
    if field.value == "always":
        return "always"
    if field.value is not None and not isinstance(field.value, bool):
        raise field.fail("true, false or always")
    return field.boolean(default=True)
