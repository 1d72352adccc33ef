"""The nudge's Job (docs/sources.md, "After the hook"), made from the workload's audit CronJob as `kubectl create job
--from=cronjob` makes one: the same pod (ServiceAccount, image, Secrets, securityContext: what cutover-pod-pinned
admits), running `cutover nudge` under a short deadline. Pure: the CronJob in, the Job out.

No owner reference: the CronJob controller would count the Job as its own, and ArgoCD's CronJob health turns a
CronJob whose last Job failed Degraded. No ArgoCD tracking mark either (a jobTemplate carries none), so ArgoCD
neither shows nor prunes it; `ttlSecondsAfterFinished` removes it. Called by `flows.nudge`.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Mapping
from typing import Any

DEADLINE = 900  # seconds the nudge's Job may run: the hook's operation ends within seconds, a pickup within a minute
KEEP = 600  # seconds a finished nudge Job stays for `kubectl logs`
HOOK = re.compile(r"^cutover-(?:presync|postsync|syncfail)")  # the hooks' names, before the workload's suffix


def audit_cronjob(hook_job: str | None) -> str | None:
    """The workload's audit CronJob, named as its hooks are (the Component's nameSuffix): cutover-postsync-<app>
    → cutover-audit-<app>. None for a Job that is no hook of the Component (a run by hand)."""
    if not hook_job or not HOOK.match(hook_job):
        return None
    return HOOK.sub("cutover-audit", hook_job, count=1)


def job_name(cronjob: str, stamp: int) -> str:
    """cutover-nudge-<app>-<stamp> (the hook's clock, in seconds: one per commit a hook makes), within the 63
    characters of the job-name label its pods carry."""
    stem = cronjob.replace("cutover-audit", "cutover-nudge", 1)
    tail = f"-{stamp}"
    return f"{stem[:63 - len(tail)].rstrip('-')}{tail}"


def nudge_job(cronjob: Mapping[str, Any], *, name: str) -> dict[str, Any]:
    """The Job `name` in the CronJob's namespace: its jobTemplate, running `cutover nudge`."""
    spec = copy.deepcopy(dict(cronjob["spec"]["jobTemplate"]["spec"]))
    spec.update(activeDeadlineSeconds=DEADLINE, backoffLimit=0, ttlSecondsAfterFinished=KEEP)
    pod = spec["template"]
    labels = {**(pod.get("metadata") or {}).get("labels", {}), "app.kubernetes.io/component": "nudge"}
    pod["metadata"] = {**(pod.get("metadata") or {}), "labels": labels}
    for container in pod["spec"]["containers"]:
        container["args"] = ["nudge"]
        container["env"] = [_deadline(env) for env in container.get("env") or ()]
    meta = cronjob["metadata"]
    return {"apiVersion": "batch/v1", "kind": "Job", "spec": spec,
            "metadata": {"name": name, "namespace": meta["namespace"],
                         "labels": {"app.kubernetes.io/name": "cutover", "app.kubernetes.io/component": "nudge"},
                         "annotations": {"cutover.dev/from": f"cronjob/{meta['name']}"}}}


def _deadline(env: Mapping[str, Any]) -> dict[str, Any]:
    """CUTOVER_DEADLINE_SECONDS mirrors the Job's own deadline (cutover says when a plan needs longer)."""
    return {"name": env["name"], "value": str(DEADLINE)} if env.get("name") == "CUTOVER_DEADLINE_SECONDS" \
        else dict(env)
