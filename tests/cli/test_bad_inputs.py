"""The bad-input corpus through the command line, in process: every case exits 2 with a message naming what
is wrong, before anything is touched. KUBECONFIG points nowhere, so a command that went on to the cluster
would end with `cluster_config` (exit 1) instead: exit 2 proves it stopped first."""

from __future__ import annotations

from pathlib import Path

import pytest
import structlog

from cutover.cli import main
from plans import BAD, GOOD

FIXTURE = (Path(__file__).parent.parent / "fixtures" / "reasoning-long-service.yaml").read_text()


def run(capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, *args: str,
        plan: str = GOOD, service: str | None = None, pod: bool = False) -> tuple[int, str]:
    plan_file = tmp_path / "plan.yaml"
    plan_file.write_text(plan)
    monkeypatch.setenv("CUTOVER_PLAN", str(plan_file))
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "no-kubeconfig"))
    monkeypatch.setenv("CUTOVER_TERMINATION_LOG", str(tmp_path / "termination-log"))
    if pod:  # the kubelet's address: one of cutover's pods
        monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "10.96.0.1")
    else:
        monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    if service is not None:
        (tmp_path / "svc.yaml").write_text(service)
    try:
        with pytest.raises(SystemExit) as caught:
            main.main(["--log-level", "error", *args])
    finally:
        structlog.reset_defaults()  # the CLI configures logging for the process: not for the next test
    out, err = capsys.readouterr()
    said = [line for line in err.splitlines() if line.startswith("cutover ")]  # beside a patch on stdout
    outcome = said[-1] if said else out.strip().splitlines()[-1]
    return int(caught.value.code or 0), outcome


PLAN_CASES = [(why, text, f"{field}: expected") for why, text, field, _ in BAD]

FILE_CASES = [
    ("file not yaml", "kind: [oops\n", "not valid YAML"),
    ("file without the document", FIXTURE.replace("kind: Service", "kind: ConfigMap"), "no document with kind"),
    ("file with it twice", FIXTURE + "---\n" + FIXTURE, "2 documents match"),
    ("file without the selector", FIXTURE.replace("  selector:", "  chooser:"), "spec.selector: missing"),
    ("selector as a list", FIXTURE.replace("""  selector:
    app.kubernetes.io/name: llm-reasoning             # the vLLM deployment
    component: predictor
    serving.kserve.io/inferenceservice: reasoning     # KServe's own label on the vLLM pods
""", "  selector: [a, b]\n"), "expected a mapping of labels"),
    ("tab indentation", FIXTURE.replace("    component: predictor", "\tcomponent: predictor"),
     "a tab in the indentation"),
    ("duplicate label", FIXTURE.replace("    component: predictor\n", "    component: predictor\n"
                                                                   "    component: again\n"), "duplicate key"),
    ("label not a string", FIXTURE.replace("component: predictor", "component: 2"), "not a string"),
]

CLI_CASES = [
    ("no command", (), "invalid arguments"),
    ("unknown command", ("launch",), "invalid arguments"),
    ("verify without a backend", ("verify",), "invalid arguments"),
    ("verify an unknown backend", ("verify", "--backend", "sglang"), "--backend: expected one of candle, vllm"),
    ("run to an unknown backend", ("run", "--to", "tgi"), "--to: expected one of candle, vllm, found 'tgi'"),
    ("diff to an unknown backend", ("diff", "--file", "svc.yaml", "--to", "tgi"), "--to: expected one of"),
    ("unknown output format", ("status", "--output", "yaml"), "invalid arguments"),
    ("unknown log format", ("--log-format", "xml", "status"), "invalid arguments"),
    ("diff without a file", ("diff", "--to", "candle"), "invalid arguments"),
    ("diff with both targets", ("diff", "--file", "svc.yaml", "--to", "candle", "--selector", "a=b"),
     "exactly one of --to BACKEND or --selector"),
    ("diff with a broken selector", ("diff", "--file", "svc.yaml", "--selector", "a"), "expected K=V pairs"),
    ("diff with a bad label", ("diff", "--file", "svc.yaml", "--selector", "a=b c"),
     "label value 'b c' holds ' ': only alphanumerics, '-', '_' and '.' are allowed"),
    # each pair is checked and named: these were accepted (an empty value, the last of two, a pair skipped)
    ("diff with an empty value", ("diff", "--file", "svc.yaml", "--selector", "app="),
     "pair 1 of 'app=': expected a value after '=', found none in 'app='"),
    ("diff with a key twice", ("diff", "--file", "svc.yaml", "--selector", "app=foo,app=bar"),
     "pair 2 of 'app=foo,app=bar': 'app' is given twice (app=foo, app=bar)"),
    ("diff with an empty pair", ("diff", "--file", "svc.yaml", "--selector", "app=foo,,version=v2"),
     "pair 2 of 'app=foo,,version=v2': expected K=V, found an empty pair"),
    ("diff with a long value", ("diff", "--file", "svc.yaml", "--selector", "app=" + "x" * 64),
     "is 64 characters long: 1 to 63 allowed"),
    ("diff with a value ending badly", ("diff", "--file", "svc.yaml", "--selector", "app=foo-"),
     "label value 'foo-' must begin and end with an alphanumeric"),
    # each command takes only its own options: these were accepted and ignored
    ("the demo takes no --to", ("demo", "--to", "bogus"), "unrecognized arguments: --to bogus"),
    ("verify takes --backend, not --to", ("verify", "--backend", "candle", "--to", "candle"),
     "unrecognized arguments: --to candle"),
    ("status writes nothing to keep from writing", ("status", "--dry-run"), "unrecognized arguments: --dry-run"),
    ("the demo prints a story, not JSON", ("demo", "--output", "json"), "unrecognized arguments: --output json"),
    ("a kubeconfig that is not there", ("--kubeconfig", "/nonexistent", "status"),
     "--kubeconfig: expected a kubeconfig file, found nothing at /nonexistent"),
    ("--name not in the plan", ("--name", "other", "status"), "--name: expected a metadata.name"),
    ("plan file missing", ("--plan", "/nowhere/plan.yaml", "status"), "file not found"),
]


def test_the_corpus_is_large() -> None:
    assert len(PLAN_CASES) + len(FILE_CASES) + len(CLI_CASES) >= 30


@pytest.mark.parametrize(("why", "text", "words"), PLAN_CASES, ids=[case[0] for case in PLAN_CASES])
def test_bad_plans(capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, why: str,
                   text: str, words: str) -> None:
    code, outcome = run(capsys, tmp_path, monkeypatch, "postsync", plan=text)
    assert code == 2 and words in outcome and "hint:" in outcome


@pytest.mark.parametrize(("why", "text", "words"), FILE_CASES, ids=[case[0] for case in FILE_CASES])
def test_bad_service_files(capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                           why: str, text: str, words: str) -> None:
    code, outcome = run(capsys, tmp_path, monkeypatch, "diff", "--file", str(tmp_path / "svc.yaml"), "--to",
                        "candle", service=text)
    assert code == 2 and words in outcome


@pytest.mark.parametrize(("why", "args", "words"), CLI_CASES, ids=[case[0] for case in CLI_CASES])
def test_bad_command_lines(capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                           why: str, args: tuple[str, ...], words: str) -> None:
    monkeypatch.chdir(tmp_path)
    code, outcome = run(capsys, tmp_path, monkeypatch, *args, service=FIXTURE)
    assert code == 2 and words in outcome


HOSTILE_PLANS = [
    ("plan not UTF-8", GOOD.encode() + b"# caf\xe9\n", "not UTF-8 text"),
    ("plan nested 10,000 deep", GOOD.encode() + b"extra: " + b"[" * 10000 + b"]" * 10000 + b"\n",
     "nested deeper than 200"),
    ("plan nested 100,000 deep (kills libyaml)", b"a:\n" + b"- " * 100000 + b"x\n", "nested deeper than 200"),
    ("plan of 2 MiB", GOOD.encode() + b"#" * (2 << 20) + b"\n", "larger than the 1 MiB"),
    ("plan with an alias bomb", GOOD.replace("kind: CutoverPlan", "kind: CutoverPlan\n" + "".join(
        f"l{n}: &l{n} [{', '.join([f'*l{n - 1}' if n else 'lol'] * 9)}]\n" for n in range(10))).encode(),
     "l0: expected no such key"),
]


@pytest.mark.parametrize(("why", "raw", "words"), HOSTILE_PLANS, ids=[case[0] for case in HOSTILE_PLANS])
def test_hostile_plans(capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                       why: str, raw: bytes, words: str) -> None:
    """Bytes a plan mount can hold that are not a plan: each is exit 2 naming what is wrong, at once."""
    (tmp_path / "hostile.yaml").write_bytes(raw)
    code, outcome = run(capsys, tmp_path, monkeypatch, "--plan", str(tmp_path / "hostile.yaml"), "postsync")
    assert code == 2 and words in outcome and "hint:" in outcome, outcome


@pytest.mark.parametrize("args", [("diff", "--output", "json", "--to", "candle"),
                                  ("status", "--output=json", "--bogus"),
                                  ("verify", "--output", "json")])
def test_an_argument_error_with_output_json_is_one_json_document_on_stdout(
        capsys: pytest.CaptureFixture[str], args: tuple[str, ...]) -> None:
    """docs/commands.md: with --output json, stdout holds exactly one JSON document, argument errors included (`| jq`
    once read argparse's usage there); the outcome line goes to stderr."""
    import json

    with pytest.raises(SystemExit) as caught:
        main.main(list(args))
    out, err = capsys.readouterr()
    answer = json.loads(out)
    assert caught.value.code == 2 and answer["ok"] is False and answer["exitCode"] == 2
    assert (answer["cause"], answer["command"]) == ("invalid_arguments", args[0])
    assert "invalid arguments" in err.splitlines()[-1]


def test_diff_without_to_writes_the_plans_target_as_documented(
        capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """docs/commands.md: `--to` defaults to the plan's target (it was refused: "expected exactly one of ...")."""
    code, outcome = run(capsys, tmp_path, monkeypatch, "diff", "--file", str(tmp_path / "svc.yaml"),
                        service=FIXTURE)
    assert code == 0, outcome
    with_to = run(capsys, tmp_path, monkeypatch, "diff", "--file", str(tmp_path / "svc.yaml"), "--to", "candle",
                  service=FIXTURE)
    assert with_to == (0, outcome)  # the plan's target is candle


def test_diff_of_a_plan_with_several_cutovers_needs_name(
        capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Offline too, a `cutovers:` list is never read as its first entry: diff asks for --name, and takes it."""
    import textwrap

    body = GOOD.split("kind: CutoverPlan\n", 1)[1]
    second = body.replace("name: reasoning-long-predictor", "name: chat-predictor").replace(
        "name: reasoning-long\n", "name: chat\n")
    several = "apiVersion: cutover/v1alpha1\nkind: CutoverPlan\ncutovers:\n" + "".join(
        "  - " + textwrap.indent(doc, "    ").lstrip() for doc in (body, second))
    code, outcome = run(capsys, tmp_path, monkeypatch, "diff", "--file", str(tmp_path / "svc.yaml"), plan=several,
                        service=FIXTURE)
    assert code == 2 and "--name: expected one of reasoning-long, chat" in outcome and "hint:" in outcome
    code, outcome = run(capsys, tmp_path, monkeypatch, "--name", "reasoning-long", "diff", "--file",
                        str(tmp_path / "svc.yaml"), plan=several, service=FIXTURE)
    assert code == 0, outcome


def test_in_a_pod_a_plan_of_several_services_is_refused_unless_one_is_named(
        capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The newcomer's C10: the shipped Jobs serve one Service (its Lease, its Role), and a rollback Job reading a
    `cutovers:` plan acted on every Service in it. In a pod such a plan is refused before anything is read."""
    import textwrap

    body = GOOD.split("kind: CutoverPlan\n", 1)[1]
    second = body.replace("name: reasoning-long-predictor", "name: chat-predictor").replace(
        "name: reasoning-long\n", "name: chat\n")
    several = "apiVersion: cutover/v1alpha1\nkind: CutoverPlan\ncutovers:\n" + "".join(
        "  - " + textwrap.indent(doc, "    ").lstrip() for doc in (body, second))
    code, outcome = run(capsys, tmp_path, monkeypatch, "rollback", plan=several, service=FIXTURE, pod=True)
    assert code == 2 and "cutovers: 2 Services in one plan, and this pod serves one" in outcome, outcome
    assert "cause invalid_plan" in outcome and "--name" in outcome


def test_global_options_after_the_command_are_read_and_override(
        capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`cutover plan --plan x.yaml` is how people type it (it answered with the top-level usage): the global options
    are read after the command too, there overriding the ones before it."""
    (tmp_path / "broken.yaml").write_text("kind: [oops\n")
    code, outcome = run(capsys, tmp_path, monkeypatch, "diff", "--file", str(tmp_path / "svc.yaml"), "--plan",
                        str(tmp_path / "broken.yaml"), service=FIXTURE)
    assert code == 2 and "broken.yaml" in outcome and "not valid YAML" in outcome, outcome
    code, outcome = run(capsys, tmp_path, monkeypatch, "--plan", str(tmp_path / "broken.yaml"), "diff", "--file",
                        str(tmp_path / "svc.yaml"), "--plan", str(tmp_path / "plan.yaml"), service=FIXTURE)
    assert code == 0, outcome
    assert main.build_parser().parse_args(["diff", "--file", "x"]).log_level == "info"  # the default stands
