"""The `cutover` command line: parse arguments, load the plan, run one command, map the outcome to an exit code.

Heavy imports (kubernetes, httpx) happen only after parsing, so `cutover --help` and argument errors
stay fast. Logging is configured once per command (`_Session`); the Slack sink joins its fan-out once
the plan says where Slack is. Commands return typed results; `outcome` renders them here, the one place
that builds a `Report`. The last line of output is a one-line outcome; in a pod it also goes to the
termination log so `kubectl describe` and the ArgoCD UI show it (docs/commands.md).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import itertools
import json
import os
import re
import signal
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn, TextIO

from cutover import __version__

if TYPE_CHECKING:
    from cutover.cli.outcome import Report
    from cutover.cli.scaffold import Workload
    from cutover.core.results import Result, Status
    from cutover.errors import CutoverError
    from cutover.flows.context import Run
    from cutover.kube.capacity import Verdict
    from cutover.kube.cluster import Cluster
    from cutover.kube.notices import Board
    from cutover.logs import Fanout, Redactor
    from cutover.plan import Plan
    from cutover.slack.sink import Sender

TERMINATION_LOG = "/dev/termination-log"
COMMANDS = ("plan", "diff", "verify", "presync", "postsync", "syncfail", "run", "rollback", "status", "audit",
            "nudge", "demo", "completion", "init")
OFFLINE = ("demo", "completion", "init")  # none reads a plan or answers in JSON
WRITERS = ("presync", "postsync", "syncfail", "run", "rollback", "audit", "nudge")  # what --dry-run keeps from writing
SECRET_ENV = ("CUTOVER_GIT_TOKEN", "CUTOVER_SLACK_WEBHOOK", "CUTOVER_SLACK_BOT_TOKEN", "CUTOVER_ARGOCD_TOKEN")


@dataclasses.dataclass(frozen=True)
class _Session:
    """One command's output: the redactor every path out shares (log, outcome line, Slack) and the sinks
    behind it."""

    redactor: Redactor
    sinks: Fanout


class _Parser(argparse.ArgumentParser):
    argv: Sequence[str] = ()  # what is being parsed: an argument error with --output json answers in JSON too

    def parse_args(self, args: Sequence[str] | None = None, namespace: Any = None) -> Any:  # type: ignore[override]
        _Parser.argv = list(sys.argv[1:] if args is None else args)
        return super().parse_args(args, namespace)

    def error(self, message: str) -> NoReturn:
        self.print_usage(sys.stderr)
        words = list(_Parser.argv)
        command = next((word for word in words if word in COMMANDS), None)
        as_json = command not in OFFLINE and ("--output=json" in words or any(  # the demo prints a story, never JSON
            word == "--output" and later == "json" for word, later in itertools.pairwise(words)))
        if as_json:  # `| jq` reads an answer for argument errors too (docs/commands.md)
            _say(json.dumps({"ok": False, "command": command, "exitCode": 2, "cause": "invalid_arguments",
                             "message": message, "hint": f"cutover {command or ''} --help".replace("  ", " ")},
                            indent=2, sort_keys=True))
        _outcome(f"cutover: invalid arguments: {message} (exit 2, cause invalid_arguments)", json_output=as_json)
        raise SystemExit(2)


EPILOG = ("every command, its options and its output: docs/commands.md; each failure's cause and what to do: "
          "docs/causes.md")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="cutover", description="Hand a stable Service name from one LLM engine's pods to "
                                                 "another's, through Git, with no gap.")
    parser.add_argument("--version", action="version", version=f"cutover {__version__}")
    _global_options(parser)
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    helps = {
        "plan": "show state, each backend's pods, and what would be committed; changes nothing",
        "diff": "offline: print the unified diff of the selector edit",
        "verify": "prove a backend's pods serve every name (--wait: on their startup timeline)",
        "presync": "ArgoCD PreSync gate", "postsync": "ArgoCD PostSync: advance or verify",
        "syncfail": "ArgoCD SyncFail: report the failure", "run": "standalone cutover",
        "rollback": "back to the previous backend, then hold", "status": "the current state",
        "audit": "what the workload's cutover-audit CronJob runs: verify a switch no hook verified, check the live "
                 "backend",
        "nudge": "what the Job a hook makes after its commit runs: once the hook's operation has ended, ask ArgoCD "
                 "to look at Git and see the sync start",
        "demo": "a whole cutover on an embedded simulated cluster",
        "completion": "print a completion script for the shell (bash: source <(cutover completion bash))",
        "init": "write one workload's layout (docs/install.md, steps 3 and 4) and print the commands an "
                "administrator runs for it; offline, but --strategy auto reads the cluster's capacity",
    }
    for name in COMMANDS:
        command = sub.add_parser(name, help=helps[name], description=helps[name], epilog=EPILOG)
        command.set_defaults(output="text", dry_run=False, to=None)  # each command takes only its own options
        _global_options(command, after=True)
        if name not in OFFLINE:
            command.add_argument("--output", choices=("text", "json"), default="text",
                                 help="json: one JSON document on stdout, on success and on failure")
        if name in WRITERS:
            command.add_argument("--dry-run", action="store_true", help="no commit, no refresh, no Slack")
        if name in ("diff", "run"):
            command.add_argument("--to", metavar="BACKEND", help="target backend (default: the plan's target)")
        if name == "diff":
            command.add_argument("--file", required=True, help="the YAML file holding the Service (a local copy)")
            command.add_argument("--selector", metavar="K=V,K=V", help="the selector to write, instead of --to "
                                                                      "(needs no plan)")
            command.add_argument("--document", metavar="KIND/NAME", help="the document to edit (default: the "
                                                                         "plan's, else the file's only Service)")
            command.add_argument("--selector-path", metavar="PATH", help="dotted path of the selector (default: "
                                                                         "the plan's, else spec.selector)")
        if name == "audit":
            command.add_argument("--exit-zero", action="store_true",
                                 help="exit 0 whatever the audit found (it is reported all the same: the log, an "
                                      "Event, Slack): what the CronJob runs, since ArgoCD counts a CronJob whose "
                                      "last Job failed as Degraded and then fails the Application's syncs")
        if name == "completion":
            command.add_argument("shell", choices=("bash", "zsh"), help="the shell to complete in")
        if name == "init":
            _init_options(command)
        if name == "status":
            command.add_argument("--fleet", metavar="[NAMESPACE/]APPLICATIONSET",
                                 help="where a fleet's change stands in each cluster, read from the ApplicationSet "
                                      "and its Applications on the cluster ArgoCD runs in (needs no plan)")
        if name == "verify":
            which = command.add_mutually_exclusive_group(required=True)
            which.add_argument("--backend", help="the backend to prove")
            which.add_argument("--synced", action="store_true",
                               help="in a Sync hook: verify the switch the revision being synced holds, through the "
                                    "Service (a fleet's verifier, docs/fleet.md)")
            command.add_argument("--wait", action="store_true", help="wait on the pods' startup timeline")
    return parser


def _init_options(command: argparse.ArgumentParser) -> None:
    command.add_argument("--application", required=True, help="the workload's ArgoCD Application")
    command.add_argument("--namespace", required=True, help="the Service's namespace")
    command.add_argument("--service", required=True, help="the Service whose name is handed over")
    command.add_argument("--port", required=True, type=int, help="the engines' port")
    command.add_argument("--repository", required=True, help="the workload's GitOps repository (https URL)")
    command.add_argument("--credentials-namespace", help="where its Jobs and Secrets live (default: cutover for "
                                                         "--first, else cutover-<application>)")
    command.add_argument("--first", action="store_true", help="the repository's first workload: also write "
                                                              "cutover/kustomization.yaml and image/")
    command.add_argument("--release", default=None, help="where the release's directories are: a repository URL "
                                                         "(default https://github.com/<org>/cutover) or the "
                                                         "directory its archive was unpacked into")
    command.add_argument("--into", default=".", help="the repository's root (default: here)")
    command.add_argument("--strategy", default="parallel", choices=("parallel", "recreate", "auto"),
                         help="the plan's handoff (docs/capacity.md); auto reads the cluster (the Service's pods, the "
                              "nodes): recreate where the new engine fits only once the old one's pods are gone")
    command.add_argument("--fleet", default=None, metavar="CLUSTER=RING,...",
                         help="a fleet's workload (docs/fleet.md): its clusters, as ArgoCD names them, each with its "
                              "ring, in step order (gpu-canary=canary,gpu-east=main)")


def _global_options(parser: argparse.ArgumentParser, *, after: bool = False) -> None:
    """The options every command reads, before the command or after it (`cutover plan --plan x.yaml`): given
    after it, a value overrides; not given, the one before it (or the default) stands."""
    group = parser.add_argument_group("global options") if after else parser
    unset = argparse.SUPPRESS if after else None
    group.add_argument("--plan", default=unset, help="plan file (default: $CUTOVER_PLAN or /etc/cutover/plan.yaml)")
    group.add_argument("--log-format", default=unset, choices=("json", "console"),
                       help="default: console on a TTY, else JSON")
    group.add_argument("--log-level", default=unset or "info", choices=("debug", "info", "warning", "error"))
    group.add_argument("--kubeconfig", default=unset, help="kubeconfig file outside a pod (default: $KUBECONFIG)")
    group.add_argument("--context", default=unset, help="kubeconfig context")
    group.add_argument("--name", default=unset, help="with a `cutovers:` list, act on this one only (metadata.name)")


def main(argv: Sequence[str] | None = None) -> NoReturn:
    args = build_parser().parse_args(argv)
    raise SystemExit(run(args))


def run(args: argparse.Namespace, *, observers: Sequence[Any] = ()) -> int:
    """Run one command; every way it can end becomes an exit code and a one-line outcome."""
    session = _start(args, observers)
    try:
        return _dispatch(args, session)
    except BaseException as exc:
        return _exit_zero(args, _ending(args, session, exc))


async def arun(argv: Sequence[str], *, observers: Sequence[Any] = ()) -> int:
    """`main` for a caller that owns the event loop: the same parsing, outcome line and exit codes. The fault
    suite runs every command this way, in fake time; `observers` are structlog processors that see each
    (redacted) event, which is how it kills a command at a chosen step."""
    args = build_parser().parse_args(argv)
    session = _start(args, observers)
    try:
        if args.command in OFFLINE:
            from cutover.errors import InvalidInput  # noqa: PLC0415

            raise InvalidInput(f"{args.command}: expected a command that runs in the caller's event loop, found "
                               f"{args.command}, which runs on its own", cause="invalid_arguments",
                               hint=f"run it as `cutover {args.command}`")
        if args.command == "diff":
            _print(args, session, [_diff(args, session)])
            return 0
        first = _first_sync(args)
        reports = [first] if first else await _execute(args, session, _plans(args, session))
        _print(args, session, reports)
        return _blocked_exit(reports)
    except BaseException as exc:
        return _exit_zero(args, _ending(args, session, exc))


def _start(args: argparse.Namespace, observers: Sequence[Any]) -> _Session:
    """Logging for this command, configured once (after parsing: keeps --help fast)."""
    from cutover import logs  # noqa: PLC0415

    sinks = logs.Fanout(observers)
    redactor = logs.configure(fmt=args.log_format, level=args.log_level, secrets=_secret_values(),
                              sinks=[sinks])
    return _Session(redactor, sinks)


def _ending(args: argparse.Namespace, session: _Session, exc: BaseException) -> int:
    """How a command that did not succeed ends: its exit code, after the outcome line."""
    from cutover.errors import CutoverError, ExitCode  # noqa: PLC0415

    as_json = getattr(args, "output", None) == "json"
    if isinstance(exc, CutoverError):
        _fail(args.command, exc, session, json_output=as_json)
        return int(exc.exit_code)
    stopped = next((ending for kind, ending in _STOPPED.items() if isinstance(exc, kind)), None)
    if stopped is not None:  # a person's Ctrl-C, or SIGTERM (ArgoCD deleted the hook Job): the Lease given back
        code, cause, message, hint = stopped
        from cutover.plan import secrets  # noqa: PLC0415

        if code == 143 and not secrets.in_cluster():  # SIGTERM on a person's machine: no hook Job was deleted
            hint = ("stopped by a SIGTERM (a kill, a closed terminal, a CI job's timeout); run it again: it resumes "
                    "from what Git and the cluster hold")
        _failed_json(session, json_output=as_json, command=args.command, exitCode=code, cause=cause,
                     message=message, hint=hint)
        _outcome(f"cutover {args.command}: FAILED (exit {code}, cause {cause}) — {message} — hint: {hint}",
                 session.redactor, json_output=as_json)
        return code
    if not isinstance(exc, Exception):
        raise exc
    import structlog  # noqa: PLC0415 -- a bug: say so, with the (redacted) traceback in the log

    structlog.get_logger("cutover").error("cutover.internal_error", cause="internal", exc_info=exc,
                                          hint="this is a bug; please report it with this log")
    _failed_json(session, json_output=as_json, command=args.command, exitCode=int(ExitCode.INTERNAL),
                 cause="internal", message=f"internal error {type(exc).__name__}",
                 hint="this is a bug; please report it with the log")
    _outcome(f"cutover {args.command}: internal error {type(exc).__name__} (exit 1, cause internal)",
             session.redactor, json_output=as_json)
    return int(ExitCode.INTERNAL)


def _exit_zero(args: argparse.Namespace, code: int) -> int:
    """`cutover audit --exit-zero`, the workload's CronJob: what it found is reported already (the outcome line,
    the log, an Event, Slack), and its Job does not fail. ArgoCD 3.x counts a CronJob whose last Job failed as
    Degraded (resource_customizations/batch/CronJob/health.lua), and a sync that waits on its resources' health
    fails on a Degraded one: a failed audit would fail the Application's next syncs, a rollback's included."""
    if not code or not getattr(args, "exit_zero", False):
        return code
    import structlog  # noqa: PLC0415

    structlog.get_logger("cutover").warning("audit.exit_zero", exit=code, hint="the audit's finding above is the "
                                            "alert; its Job succeeds so that ArgoCD's syncs of the Application go on")
    return 0


INTERACTIVE = ("plan", "status")  # and `verify` without --wait: read-only commands a person waits on

# How a run stopped from outside ends, in the documented outcome format: exit code, cause, message, hint.
_STOPPED: dict[type[BaseException], tuple[int, str, str, str]] = {
    # a first Ctrl-C cancels the main task, which unwinds as SIGTERM's does; a second one cuts that short
    KeyboardInterrupt: (130, "interrupted", "interrupted",
                        "run it again: it starts from what Git and the cluster hold (a Lease a second Ctrl-C left "
                        "behind expires by itself)"),
    asyncio.CancelledError: (143, "terminated", "terminated, nothing half-done",
                             "ArgoCD deleted the hook Job (a Terminate, its sync timeout, a newer sync); the next "
                             "sync's hooks, or a cutover-run Job, resume from what Git holds"),
}


def _dispatch(args: argparse.Namespace, session: _Session) -> int:
    if args.command == "demo":
        return _demo(args)
    if args.command == "completion":  # the script alone on stdout, for `source <(...)`: no outcome line
        from cutover.cli import completion  # noqa: PLC0415

        sys.stdout.write(completion.script(build_parser(), args.shell))
        return 0
    if args.command == "init":
        return _init(args)
    if args.command == "diff":  # offline: no cluster, no Git host
        _print(args, session, [_diff(args, session)])
        return 0
    if args.command == "status" and args.fleet:  # the hub's view of a fleet: no plan
        reports = [asyncio.run(_fleet(args))]
        _print(args, session, reports)
        return 0
    first = _first_sync(args)
    reports = [first] if first else asyncio.run(_execute(args, session, _plans(args, session)))
    _print(args, session, reports)
    return _blocked_exit(reports)


async def _fleet(args: argparse.Namespace) -> Report:
    """`cutover status --fleet [NAMESPACE/]NAME` (docs/fleet.md)."""
    from cutover.cli import outcome  # noqa: PLC0415
    from cutover.errors import InvalidInput  # noqa: PLC0415
    from cutover.flows import fleet  # noqa: PLC0415
    from cutover.kube import cluster  # noqa: PLC0415

    namespace, _, name = args.fleet.rpartition("/")
    for part in (namespace or "argocd", name):  # both go into a request's path: names, nothing else
        if not re.fullmatch(r"[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?", part):
            raise InvalidInput(f"--fleet: expected [NAMESPACE/]APPLICATIONSET, names of lowercase letters, digits, "
                               f"'-' and '.', found {args.fleet!r}", hint="e.g. --fleet argocd/reasoning-long")
    kube = await asyncio.to_thread(cluster.connect, kubeconfig=args.kubeconfig, context=args.context)
    try:
        found = await fleet.steps(kube, namespace=namespace or "argocd", name=name)
    finally:
        await kube.aclose()
    return outcome.fleet(name, found)


def _blocked_exit(reports: Sequence[Report]) -> int:
    """`cutover plan` as a pre-flight gate: the exit code of why it cannot go ahead now; 0 when it can."""
    blocked = next((report.blocked for report in reports if report.blocked), None)
    return int(blocked["exitCode"]) if blocked else 0


FIRST_SYNC = "CUTOVER_PRESYNC_WITHOUT_PLAN"  # "pass": set by hooks/presync-job.yaml, whose plan volume is optional


def _first_sync(args: argparse.Namespace) -> Report | None:
    """The PreSync gate of an Application's first sync: the plan ConfigMap is part of the Application's render
    (so that a commit changing its target syncs the hooks that act on it), applied in the Sync phase, after
    PreSync; on the first sync it is not there yet, and neither is a live selector to guard (docs/install.md).
    Only the shipped PreSync Job asks for this; everywhere else a missing plan is exit 2."""
    from cutover import plan  # noqa: PLC0415
    from cutover.cli.outcome import Report  # noqa: PLC0415

    path = plan.resolve_path(args.plan)
    if args.command != "presync" or os.environ.get(FIRST_SYNC) != "pass" or Path(path).exists():
        return None
    import structlog  # noqa: PLC0415

    structlog.get_logger("cutover").warning(
        "gate.no_plan", path=path, message=f"no plan at {path}: the Application's first sync applies it in its "
        "Sync phase, after this gate; nothing to guard yet", hint="if this is not a first sync, check that the "
        "plan ConfigMap exists in the Jobs' namespace")
    return Report(f"no plan at {path} yet (first sync): nothing to gate", data={"gate": "no_plan", "path": path})


def _diff(args: argparse.Namespace, session: _Session) -> Report:
    """Offline. With --selector and no plan named (--plan, CUTOVER_PLAN), no plan is read at all (docs/commands.md)."""
    from cutover.cli import outcome  # noqa: PLC0415
    from cutover.errors import InvalidInput  # noqa: PLC0415
    from cutover.flows import commands  # noqa: PLC0415

    planless = args.selector is not None and args.to is None and not (args.plan or os.environ.get("CUTOVER_PLAN"))
    plans = [] if planless else _plans(args, session)
    if len(plans) > 1:  # one file, one Service: never the first of a `cutovers:` list by default
        raise InvalidInput(f"--name: expected one of {', '.join(p.name for p in plans)} (the plan lists "
                           f"{len(plans)} cutovers; diff edits one Service's file), found none",
                           hint="name the cutover with --name")
    plan = plans[0] if plans else None
    diffed = asyncio.run(commands.diff(plan, file=args.file, to=args.to, selector=args.selector,
                                       document=args.document, selector_path=args.selector_path))
    return outcome.render(diffed, plan)


def _plans(args: argparse.Namespace, session: _Session) -> list[Plan]:
    from cutover import plan  # noqa: PLC0415
    from cutover.errors import InvalidInput  # noqa: PLC0415
    from cutover.plan import credentials, secrets  # noqa: PLC0415

    plans = plan.load(plan.resolve_path(args.plan))
    if len(plans) > 1 and not args.name and secrets.in_cluster():
        # the shipped Jobs serve one Service (its Lease, its Role): a rollback Job would act on every one listed
        raise InvalidInput(f"cutovers: {len(plans)} Services in one plan, and this pod serves one",
                           cause="invalid_plan", hint="one plan per workload (docs/install.md, \"More Services\"); "
                                                      "cutovers: is the command-line form, or pick one with --name")
    if secrets.in_cluster():  # where the Secrets say their credentials may go, before any request (docs/security.md)
        bounds = credentials.read(Path(secrets.secrets_dir()), in_pod=True)
        plans = [credentials.check(p, bounds) for p in plans]
        here = os.environ.get("POD_NAMESPACE")  # the pod's own (fieldRef, cutover-pod-pinned): where its Jobs are
        plans = [dataclasses.replace(p, jobs_namespace=here, branch_scope=f"{here}/") for p in plans] if here \
            else plans
    named = [p.git.token_file for p in plans] + [p.argocd.token_file for p in plans if p.argocd] + [
        f for p in plans if p.slack for f in (p.slack.webhook_file, p.slack.bot_token_file)]
    session.redactor.add(_file_values([path for path in named if path]))  # the plan may name secret files
    if args.name:
        plans = [p for p in plans if p.name == args.name]
        if not plans:
            raise InvalidInput(f"--name: expected a metadata.name from the plan, found {args.name!r}",
                               hint="list the names with `cutover status`")
    return plans


async def _execute(args: argparse.Namespace, session: _Session, plans: list[Plan]) -> list[Report]:
    from cutover import patience, sources  # noqa: PLC0415
    from cutover.kube import cluster  # noqa: PLC0415

    synced = args.command == "verify" and args.synced
    for plan in plans:  # argument checks before anything connects anywhere
        _fleet_command(args, plan)
        if args.command == "verify" and not synced:
            plan.backend(args.backend)
        if args.to is not None:
            plan.backend(args.to, field="--to")
        if args.command not in ("verify", "status") or synced:
            sources.check_tools(plan)  # kustomize_missing, exit 2
    main_task = asyncio.current_task()
    if main_task is not None:  # a deleted hook Job gets SIGTERM: unwind (give the Lease back), then exit
        with contextlib.suppress(NotImplementedError, RuntimeError):
            asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, main_task.cancel)
    kube = await asyncio.to_thread(cluster.connect, kubeconfig=args.kubeconfig, context=args.context)
    sender = _slack(args, session, plans, kube)
    board = _notices(args, session, plans, kube)
    waiting = args.command in INTERACTIVE or (args.command == "verify" and not args.wait and not synced)
    # a person at a terminal is told soon that nobody answers; for this command only (arun may run several)
    patient = patience.limit.set(patience.INTERACTIVE if waiting else None)
    try:
        return list(await asyncio.gather(*(_noticed(args, kube, plan, board) for plan in plans)))
    finally:
        if sender is not None:
            await sender.flush()  # at most 5 s: Slack never holds the outcome (docs/guarantees.md #7)
        if board is not None:
            await board.flush()  # at most 5 s, likewise
        await kube.aclose()
        patience.limit.reset(patient)
        with contextlib.suppress(NotImplementedError, RuntimeError):
            asyncio.get_running_loop().remove_signal_handler(signal.SIGTERM)


NOTICED = ("postsync", "syncfail", "run", "rollback")  # runs whose progress and outcome the Application shows
FLEET = ("presync", "verify", "syncfail", "status")  # docs/fleet.md: what a fleet's cluster runs (and diff --to)


def _fleet_command(args: argparse.Namespace, plan: Plan) -> None:
    """Exit 2 for what a fleet's cluster does not run: it writes nothing (the fleet's engine does)."""
    from cutover.errors import InvalidInput  # noqa: PLC0415

    if plan.fleet and args.command not in FLEET:
        raise InvalidInput(f"{args.command}: plan {plan.name} is a fleet's (mode: fleet), where the fleet's commit "
                           f"chooses the backend and cutover commits nothing; expected one of {', '.join(FLEET)}",
                           hint="each cluster's sync runs the PreSync gate and `cutover verify --synced` "
                                "(docs/fleet.md); the rollback is the revert of the fleet's commit")



def _notices(args: argparse.Namespace, session: _Session, plans: list[Plan], kube: Cluster) -> Board | None:
    """The notice on each plan's Application (ArgoCD 3.5 shows it on the Application's page): from the milestones
    as they are logged, then the outcome. Not in a dry run, nor with argocd.server (that account may only read)."""
    from cutover.kube import notices  # noqa: PLC0415

    applications = {plan.name: (plan.argocd.namespace, plan.argocd.application) for plan in plans
                    if plan.argocd is not None and plan.argocd.server is None and plan.argocd.application}
    if args.command not in NOTICED or args.dry_run or not applications:
        return None
    board = notices.Board(kube, applications)
    session.sinks.add(board)  # behind the redactor, like Slack
    board.start()
    return board


async def _noticed(args: argparse.Namespace, kube: Cluster, plan: Plan, board: Board | None) -> Report:
    """One plan's command, its outcome left on its Application's notice."""
    from cutover.core import notice  # noqa: PLC0415
    from cutover.errors import CutoverError  # noqa: PLC0415

    try:
        report = await _one(args, kube, plan)
    except CutoverError as exc:
        _failed(args.command, exc)  # here, in the plan's context and before Slack's flush: its thread hears it
        if board is not None:
            board.say(plan.name, notice.ended(plan.name, args.command, ok=False, said=(
                f"(exit {int(exc.exit_code)}, cause {exc.cause}) {exc.message}")))
        raise
    except asyncio.CancelledError:
        if board is not None:
            code, cause, message, _ = _STOPPED[asyncio.CancelledError]
            board.say(plan.name, notice.ended(plan.name, args.command, ok=False,
                                              said=f"(exit {code}, cause {cause}) {message}"))
        raise
    if board is not None:
        board.say(plan.name, notice.ended(plan.name, args.command, ok=True, said=report.summary))
    return report


def _slack(args: argparse.Namespace, session: _Session, plans: list[Plan], kube: Cluster) -> Sender | None:
    """Slack as a log sink, from the first plan that configures it; none in a dry run or for read-only commands.
    Its thread and announced milestones live on that plan's Service Lease, for the next Job to find."""
    from cutover.kube import lease  # noqa: PLC0415
    from cutover.slack import sink, threads, transports  # noqa: PLC0415

    chosen = next((plan for plan in plans if plan.slack), None)
    settings = chosen.slack if chosen else None
    read_only = args.command in ("status", "plan", "diff") or (args.command == "verify" and not args.synced)
    if chosen is None or settings is None or args.dry_run or read_only:  # a fleet's verifier (a hook) does speak
        return None
    webhook = _read_secret(settings.webhook_file, "CUTOVER_SLACK_WEBHOOK")
    token = _read_secret(settings.bot_token_file, "CUTOVER_SLACK_BOT_TOKEN")
    transport: transports.Webhook | transports.Bot
    if token and settings.channel:
        transport = transports.Bot(token, settings.channel)
    elif webhook:
        transport = transports.Webhook(webhook)
    else:
        return None
    outbox = sink.Outbox()
    session.redactor.add([value for value in (webhook, token) if value])
    session.sinks.add(sink.SlackSink(outbox, min_level=settings.min_level))  # behind the redactor
    store = threads.LeaseThreads(lease.Notes(kube, chosen.service.namespace, chosen.service.name))
    sender = sink.Sender(transport, outbox, store=store)
    sender.start()
    return sender


def _read_secret(path: str | None, env: str) -> str | None:
    """Slack's webhook or bot token: best effort (an unreadable file means no Slack, never a failed cutover)."""
    from cutover.errors import CutoverError  # noqa: PLC0415
    from cutover.plan import secrets  # noqa: PLC0415

    with contextlib.suppress(CutoverError):
        found = secrets.from_file(path, field="notify.slack", cause="invalid_input", hint="")
        if found:
            return found
    return secrets.from_env(env)


async def _status(kube: Cluster, plan: Plan) -> Status:
    """`cutover status`: the cluster's view, and where a handoff stands in Git when the Git host can be reached
    (best effort: a status never fails for want of a token)."""
    from cutover import githost  # noqa: PLC0415
    from cutover.errors import CutoverError  # noqa: PLC0415
    from cutover.flows import commands  # noqa: PLC0415

    try:
        host = githost.connect(plan.git)
    except CutoverError:
        return await commands.status(kube, plan)
    try:
        return await commands.status(kube, plan, host=host)
    finally:
        await host.aclose()


async def _one(args: argparse.Namespace, kube: Cluster, plan: Plan) -> Report:
    """One plan's command; those that read Git get a host for it."""
    from cutover import githost  # noqa: PLC0415
    from cutover.argocd.api import ArgoCDApi  # noqa: PLC0415
    from cutover.cli import outcome  # noqa: PLC0415
    from cutover.flows import commands  # noqa: PLC0415
    from cutover.flows.context import Run  # noqa: PLC0415

    if args.command == "verify" and not args.synced:
        return outcome.render(await commands.verify(kube, plan, backend=args.backend, wait=args.wait), plan)
    if args.command == "status":
        return outcome.render(await _status(kube, plan), plan)
    if plan.fleet:  # a fleet's shared plan: the hook's own Application, from ArgoCD's tracking on its Job
        from cutover.flows import fleet  # noqa: PLC0415

        plan = await fleet.own_application(kube, plan, job=os.environ.get("CUTOVER_JOB_NAME"),
                                           namespace=os.environ.get("POD_NAMESPACE"))
    host, api = githost.connect(plan.git), ArgoCDApi.connect(plan.argocd)
    try:
        if args.command == "plan":
            return outcome.render(await commands.show_plan(kube, plan, host=host), plan)
        hook = os.environ.get("CUTOVER_JOB_NAME") if args.command in ("postsync", "syncfail") else None
        job = Run.create(kube, plan, host, identity=_identity(kube.own_namespace), dry_run=bool(args.dry_run),
                         api=api, hook_job=hook)
        return outcome.render(await _phase(args, job), plan)
    finally:
        await host.aclose()
        if api is not None:
            await api.aclose()


async def _phase(args: argparse.Namespace, job: Run) -> Result:
    from cutover.flows import explicit, phases  # noqa: PLC0415

    if args.command != "verify":  # the verifier waits for no startup: its Job's deadline is its own (fleet/)
        _say_deadline(args.command, job.plan)
    if args.command == "presync":
        return await phases.presync(job, job_name=os.environ.get("CUTOVER_JOB_NAME"))
    if args.command == "verify":  # --synced: a Sync hook's (docs/fleet.md)
        from cutover.flows import fleet  # noqa: PLC0415

        return await fleet.verify_synced(job, job_name=os.environ.get("CUTOVER_JOB_NAME"))
    if args.command == "run":
        return await explicit.run(job, to=args.to)
    if args.command == "nudge":
        from cutover.flows import nudge  # noqa: PLC0415

        return await nudge.nudge(job)
    writers = {"postsync": phases.postsync, "rollback": explicit.rollback, "syncfail": phases.syncfail,
               "audit": phases.audit}
    return await writers[args.command](job)


def _say_deadline(command: str, plan: Plan) -> None:
    """In a Job that mirrors its activeDeadlineSeconds (CUTOVER_DEADLINE_SECONDS), say first when the plan may need
    longer: the Job controller's kill says nothing of why (docs/capacity.md)."""
    import structlog  # noqa: PLC0415

    from cutover.core import deadline  # noqa: PLC0415
    from cutover.flows import sync  # noqa: PLC0415

    given = os.environ.get("CUTOVER_DEADLINE_SECONDS", "")
    if not given.isdigit():  # not in a Job that says it (a person's shell), or not a number of seconds
        return
    whole = command in ("run", "rollback")  # every hop in one Job, and ArgoCD's syncs waited for
    found = deadline.warning(plan, float(given), whose="this Job's", whole_path=whole,
                             sync_wait=sync.SYNC_WAIT if whole else 0.0)
    if found:
        structlog.get_logger("cutover").warning(
            "job.deadline_short", message=found, cause="deadline_short",
            hint="raise activeDeadlineSeconds (and CUTOVER_DEADLINE_SECONDS) of the Jobs above it, or lower "
                 "verify.maxWait / handoff.maxGap")


def _init(args: argparse.Namespace) -> int:
    """`cutover init` (cli/scaffold.py): the files written, the administrator's commands printed."""
    from cutover.cli import scaffold  # noqa: PLC0415
    from cutover.errors import InvalidInput  # noqa: PLC0415

    label = re.compile(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?")
    for flag in ("application", "namespace", "service", "credentials_namespace"):
        value = getattr(args, flag)
        if value is not None and not label.fullmatch(value):
            raise InvalidInput(f"--{flag.replace('_', '-')}: expected a DNS label (lowercase alphanumerics and '-', "
                               f"at most 63), found {value!r}", cause="invalid_arguments",
                               hint="the names Kubernetes and ArgoCD give them")
    if not 1 <= args.port <= 65535:
        raise InvalidInput(f"--port: expected a port from 1 to 65535, found {args.port}", cause="invalid_arguments",
                           hint="the engines' container port")
    if not args.repository.startswith("https://"):
        raise InvalidInput(f"--repository: expected an https:// URL, found {args.repository!r}",
                           cause="invalid_arguments", hint="the repository ArgoCD reads and cutover's token writes")
    fleet = _fleet_clusters(args.fleet, label) if args.fleet is not None else ()
    if fleet and args.strategy != "parallel":
        raise InvalidInput(f"--strategy: expected parallel with --fleet, found {args.strategy}",
                           cause="invalid_arguments",
                           hint="a fleet's one plan serves every cluster; a full cluster takes recreate in two fleet "
                                "commits (docs/fleet.md)")
    credentials = args.credentials_namespace or ("cutover" if args.first else f"cutover-{args.application}")
    workload = scaffold.Workload(args.application, args.namespace, args.service, args.port, args.repository,
                                 credentials, release=args.release or scaffold.RELEASE, fleet=fleet,
                                 strategy=args.strategy)
    judged: list[str] = []
    if args.strategy == "auto":
        selector, verdict, said = asyncio.run(_init_capacity(args, workload))
        workload = dataclasses.replace(workload, strategy=scaffold.strategy_for(verdict), source_selector=selector)
        judged = [f"capacity (read from the cluster): {said}", f"  → handoff: {workload.strategy}", ""]
    into = Path(args.into)
    written = scaffold.write(scaffold.files(workload, into=into, first=args.first), into=into)
    lines = [*judged, "written:", *(f"  {path}" for path in written), "",
             "as ArgoCD's administrator, once (docs/install.md, step 2; nothing of it belongs in Git):",
             *(f"  {line}".replace("\n", "\n  ") for line in scaffold.commands(workload)),
             f"  kubectl apply -f {into / args.application / 'appproject.yaml'}",
             *([f"  kubectl apply -f {into / args.application / 'applicationset.yaml'}   # on the hub"] if fleet
               else []), ""]
    if fleet:
        lines += [f"and in the kustomization of {args.application}/ (beside the Service and the engines): "
                  "resources: hooks, components: mark", ""]
    if not args.first:
        lines += [f"and in cutover/kustomization.yaml, under resources: {args.application}"
                  + (f" and {args.application}/namespace" if workload.suffixed else ""), ""]
    sys.stdout.write("\n".join(lines))
    _outcome(f"cutover init: OK — {args.application}'s layout written ({len(written)} files)", json_output=False)
    return 0


async def _init_capacity(args: argparse.Namespace,
                         workload: Workload) -> tuple[dict[str, str], Verdict | None, str]:
    """`cutover init --strategy auto`, read only: the live Service's selector, and where one more pod like the
    pods it selects fits (kube/capacity.py, as the gate judges a target: docs/capacity.md), said in one line."""
    from cutover.errors import InvalidInput  # noqa: PLC0415
    from cutover.kube import capacity, cluster  # noqa: PLC0415

    source, target = workload.backends
    kube = await asyncio.to_thread(cluster.connect, kubeconfig=args.kubeconfig, context=args.context)
    try:
        try:
            service = await kube.service(args.namespace, args.service)
        except InvalidInput as exc:
            raise InvalidInput(f"--service: expected a Service {args.namespace}/{args.service} in the cluster, found "
                               "none", cause="invalid_arguments",
                               hint="--strategy auto reads it and its pods: check --namespace, --service and the "
                                    "kubeconfig's context (or choose --strategy parallel or recreate)") from exc
        nodes, (bound, seen_all) = await asyncio.gather(kube.nodes(), kube.bound_pods(args.namespace))
    finally:
        await kube.aclose()
    selector = dict(service.selector)
    pods = [pod for pod in bound if pod.namespace == args.namespace and selector and pod.matches(selector)]
    if not pods:
        shown = ", ".join(f"{key}={value}" for key, value in sorted(selector.items())) or "no selector"
        return selector, None, f"the Service selects no running pod ({shown}): nothing to judge {target}'s room from"
    verdict = capacity.judge(target=target, pending=pods[0], needed=len(pods), nodes=nodes, bound=bound,
                             source=source, source_pods=pods, seen_all=seen_all)
    return selector, verdict, f"{verdict.summary()} (judged as {len(pods)} more pod(s) like {source}'s)"


def _fleet_clusters(value: str, label: re.Pattern[str]) -> tuple[tuple[str, str], ...]:
    """`--fleet CLUSTER=RING,...`: the clusters in step order, each a DNS label with its ring."""
    from cutover.errors import InvalidInput  # noqa: PLC0415

    found: list[tuple[str, str]] = []
    for item in value.split(","):
        cluster, _, ring = item.strip().partition("=")
        if not label.fullmatch(cluster) or not label.fullmatch(ring) or cluster in dict(found):
            raise InvalidInput(f"--fleet: expected CLUSTER=RING,... (each a DNS label, each cluster once), found "
                               f"{item.strip()!r}",
                               cause="invalid_arguments", hint="the clusters as ArgoCD names them, each with the "
                                                               "ring it is synced in (gpu-canary=canary,gpu-east=main)")
        found.append((cluster, ring))
    return tuple(found)


def _demo(args: argparse.Namespace) -> int:
    try:
        from cutover.demo import story  # noqa: PLC0415 -- needs the demo extra
    except ImportError as exc:
        from cutover.errors import InvalidInput  # noqa: PLC0415

        raise InvalidInput("the demo needs the demo extra", cause="demo_extra_missing",
                           hint="in a checkout of cutover: `make demo`, or pip install '.[demo]' (the "
                                "distribution is llm-cutover, not published on PyPI, where `cutover` is another "
                                "project)") from exc
    return story.main(args)


def _identity(namespace: str) -> str:
    """Who holds the Lease: `<namespace>/<pod>#<nonce>` in a Job (POD_NAME from the downward API), which lets a
    re-run see that a killed holder's pod has ended (lock.holder_pod); else `<host>-<pid>#<nonce>`. The nonce
    makes it one process's: two runs on one host (one $HOSTNAME) would otherwise each take the other's renewals
    for their own and both pass the confirm."""
    import socket  # noqa: PLC0415
    import uuid  # noqa: PLC0415

    nonce = uuid.uuid4().hex[:12]
    if os.environ.get("POD_NAME"):
        return f"{os.environ.get('POD_NAMESPACE') or namespace}/{os.environ['POD_NAME']}#{nonce}"
    return f"{os.environ.get('HOSTNAME') or socket.gethostname()}-{os.getpid()}#{nonce}"


def _secret_values() -> list[str]:
    """Secret values this process may hold from its start (environment, every file of the Secrets' mounts but their
    bounds), so the redactor can hide them anywhere: a credential in a file of any name or shape included."""
    from cutover.plan import credentials, secrets  # noqa: PLC0415

    values = [(os.environ.get(name) or "").strip() for name in SECRET_ENV]
    values += credentials.secret_values(Path(secrets.secrets_dir()))
    return [value for value in values if value]


def _file_values(files: Sequence[str]) -> list[str]:
    """What the files a plan names as secret hold (off a pod, anywhere under CUTOVER_SECRETS_DIR)."""
    values = []
    for path in files:
        with contextlib.suppress(OSError, UnicodeDecodeError):  # not mounted: nothing to hide
            values.append(Path(path).read_text(encoding="utf-8").strip())
    return [value for value in values if value]


def _print(args: argparse.Namespace, session: _Session, reports: list[Report]) -> None:
    scrub = session.redactor.scrub_text  # a report names what it read: never a secret it happened to hold
    if args.output == "json":
        # like the failure document: `ok` and `command` first, so `jq .ok` reads every answer alike
        body: Any = [session.redactor.scrub({"ok": not report.blocked, "command": args.command, **report.data})
                     for report in reports]
        _say(json.dumps(body[0] if len(body) == 1 else body, indent=2, sort_keys=True))
    else:
        for report in reports:
            if report.headline:
                _say(scrub(report.summary))
            for line in report.lines:
                _say(scrub(line))
            if report.raw is not None:  # a patch, byte for byte: CRLF and the no-newline marker survive
                sys.stdout.write(scrub(report.raw))
    blocked = next((report.blocked for report in reports if report.blocked), None)
    if blocked:  # `cutover plan`, a pre-flight gate: the report above, and why it cannot go ahead now
        _outcome(f"cutover {args.command}: NOT READY (exit {blocked['exitCode']}, cause {blocked['cause']}) — "
                 f"{blocked['error']} — hint: {blocked['hint']}", session.redactor,
                 json_output=args.output == "json")
        return
    summary = reports[0].summary if len(reports) == 1 else f"{len(reports)} cutovers: ok"
    # a patch on stdout is a document too (`cutover diff > x.patch`): the outcome line goes beside it, to stderr
    patch = any(report.raw is not None for report in reports)
    _outcome(f"cutover {args.command}: OK — {summary}", session.redactor, json_output=args.output == "json" or patch)


def _failed(command: str, exc: CutoverError) -> None:
    """The failure as a milestone (the log, Slack), once per exception."""
    import structlog  # noqa: PLC0415

    from cutover.core import milestones  # noqa: PLC0415

    if not exc.announced:
        structlog.get_logger("cutover").error(milestones.FAILED, command=command, cause=exc.cause,
                                              message=exc.message, hint=exc.hint)
        exc.announced = True


def _fail(command: str, exc: CutoverError, session: _Session, *, json_output: bool = False) -> None:
    _failed(command, exc)
    _failed_json(session, json_output=json_output, command=command, exitCode=int(exc.exit_code), cause=exc.cause,
                 message=exc.message, hint=exc.hint)
    hint = f" — hint: {exc.hint}" if exc.hint else ""
    _outcome(f"cutover {command}: FAILED (exit {int(exc.exit_code)}, cause {exc.cause}) — {exc.message}{hint}",
             session.redactor, json_output=json_output)


def _failed_json(session: _Session, *, json_output: bool, **fields: Any) -> None:
    """With --output json, a failure is one JSON document on stdout too (ok false, the command, exitCode, cause,
    message, hint): `| jq` reads an answer either way."""
    if json_output:
        _say(json.dumps(session.redactor.scrub({"ok": False, **fields}), indent=2, sort_keys=True))


def _say(text: str, stream: TextIO | None = None) -> None:
    """`text` and its newline in one write, flushed (as the logs are written, cutover.logs): a pod's stdout and
    stderr are two pipes read apart, and a line written in two parts can be split by the other stream's."""
    stream = stream or sys.stdout
    stream.write(text + "\n")
    stream.flush()


def _outcome(line: str, redactor: Redactor | None = None, *, json_output: bool = False) -> None:
    """The last line of output (on stderr beside a document on stdout: --output json, `diff`'s patch); also the
    pod's termination message when running in one."""
    from cutover.logs import Redactor  # noqa: PLC0415

    line = (redactor or Redactor(_secret_values())).scrub_text(" ".join(line.split()))
    sys.stdout.flush()
    sys.stderr.flush()
    _say(line, sys.stderr if json_output else sys.stdout)
    path = os.environ.get("CUTOVER_TERMINATION_LOG", TERMINATION_LOG)
    if os.path.exists(os.path.dirname(path) or ".") and (os.path.exists(path) or path != TERMINATION_LOG):
        # best effort (docs/guarantees.md #7)
        with contextlib.suppress(OSError), open(path, "w", encoding="utf-8") as handle:
            handle.write(line[:4096])  # the kubelet keeps at most 4096 bytes
