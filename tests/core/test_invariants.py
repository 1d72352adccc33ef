"""docs/guarantees.md #1, #2 and #5 under random histories: a hypothesis state machine drives the decision core the way
the phases compose it (`decide.next_step` on what a PostSync observes, `switch.git_step` on the writer's read,
`gate.judge` on the pods the selector picks right before the write, the edit with its guard) while pods turn
Ready and unready, engines lose and regain names, people commit, Jobs are killed and re-run and ArgoCD syncs.
After every step an oracle that keeps its own record of the world checks every commit in the history."""

from __future__ import annotations

import dataclasses
import functools
import os
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from cutover import plan
from cutover.core import decide, gate, steps, switch
from cutover.core.trailers import Trailers
from cutover.core.views import Commit as GitCommit
from cutover.core.views import PodView, ServiceView
from cutover.demo.world import World
from cutover.sources import yaml_edit
from helpers import outside_the_selector

FIXTURE = (Path(__file__).parent.parent / "fixtures" / "reasoning-long-service.yaml").read_text()
_world = World.__new__(World)
_world.port = 8080
(PLAN,) = plan.parse(_world.plan_text())
DOCUMENT, SELECTOR_PATH = PLAN.git.document, PLAN.git.selector_path
NAMES = frozenset(PLAN.verify.served_names)
LOOSE = {"component": "predictor"}  # a candle selector that also picks the vLLM pods
CANARY = {"component": "canary"}  # what no backend of the plan selects
EXPLORED = {"commits": 0}  # cutover commits the machine made: a run that never commits proves nothing


@dataclasses.dataclass
class Pod:
    name: str
    labels: dict[str, str]
    ready: bool = False
    names: frozenset[str] = frozenset()  # what its engine answers to now
    proved_at: datetime | None = None  # the oracle's record: when it last answered every served name


@dataclasses.dataclass
class Commit:
    by: str  # "cutover" or a person
    before: str
    after: str
    good: int = 0  # the oracle's count, at the moment of the commit, of pods docs/guarantees.md #1 counts
    foreign: int = 0  # the oracle's count of other backends' pods the committed selector picks

    def __post_init__(self) -> None:  # read once: the invariants look at every commit after every step
        self.selectors = (selector(self.before), selector(self.after))
        self.rest_kept = outside_the_selector(self.before) == outside_the_selector(self.after)


def selector(text: str) -> dict[str, str]:
    return dict(_read(text))


@functools.cache  # a history visits a handful of distinct files; the functions are pure, so read each once
def _read(text: str) -> tuple[tuple[str, str], ...]:
    return tuple(yaml_edit.read_selector(text, document=DOCUMENT, selector_path=SELECTOR_PATH).items())


def edit(text: str, wanted: dict[str, str]) -> str:
    return _edit(text, tuple(wanted.items()))


@functools.cache
def _edit(text: str, wanted: tuple[tuple[str, str], ...]) -> str:
    return yaml_edit.edit_selector(text, document=DOCUMENT, selector_path=SELECTOR_PATH, selector=dict(wanted)).after


class Cutover(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.now = datetime(2026, 11, 30, 9, 0, tzinfo=UTC)
        self.pods: dict[str, Pod] = {}
        self.text = FIXTURE
        self.history: list[Commit] = []
        self.job: dict[str, datetime] | None = None  # a running Job's proofs: pod → when (None: no Job)
        self.live = selector(FIXTURE)
        self.backends = {name: dict(backend.selector) for name, backend in PLAN.backends.items()}
        self.min_ready = 1
        self.plan = PLAN

    @initialize(min_ready=st.sampled_from([1, 2]), loose=st.sampled_from([False, False, False, True]),
                candles=st.lists(st.booleans(), min_size=1, max_size=3))
    def configure(self, min_ready: int, loose: bool, candles: list[bool]) -> None:
        """The reference scenario's start: vLLM serving, candle pods starting."""
        self.min_ready = min_ready
        if loose:
            self.backends["candle"] = dict(LOOSE)
        candle = dataclasses.replace(PLAN.backends["candle"], selector=self.backends["candle"])
        self.plan = dataclasses.replace(PLAN, backends={**PLAN.backends, "candle": candle},
                                        verify=dataclasses.replace(PLAN.verify, min_ready_pods=min_ready))
        self.a_pod_starts("vllm")
        self.pods["vllm-0"].ready, self.pods["vllm-0"].names = True, NAMES
        for serving in candles:
            self.a_pod_starts("candle")
            if serving:
                self.pods[f"candle-{len(self.pods) - 1}"].ready = True
                self.pods[f"candle-{len(self.pods) - 1}"].names = NAMES

    # --- the world --------------------------------------------------------------------------------------------

    @rule(backend=st.sampled_from(["vllm", "candle"]))
    def a_pod_starts(self, backend: str) -> None:
        name = f"{backend}-{len(self.pods)}"
        labels = dict(PLAN.backends[backend].selector)  # the pods' real labels, whatever the plan selects
        self.pods[name] = Pod(name, labels)

    @precondition(lambda self: bool(self.pods))
    @rule(data=st.data())
    def a_pod_serves(self, data: st.DataObject) -> None:
        """The common story: Ready, its engine answering every name."""
        pod = self.pods[data.draw(st.sampled_from(sorted(self.pods)))]
        pod.ready, pod.names = True, NAMES

    @precondition(lambda self: bool(self.pods))
    @rule(data=st.data(), ready=st.booleans())
    def readiness_changes(self, data: st.DataObject, ready: bool) -> None:
        self.pods[data.draw(st.sampled_from(sorted(self.pods)))].ready = ready

    @precondition(lambda self: bool(self.pods))
    @rule(data=st.data(), names=st.frozensets(st.sampled_from(sorted(NAMES))))
    def an_engine_serves(self, data: st.DataObject, names: frozenset[str]) -> None:
        self.pods[data.draw(st.sampled_from(sorted(self.pods)))].names = names  # up, down, a name vanishing

    @rule(seconds=st.integers(1, 120))
    def time_passes(self, seconds: int) -> None:
        self.now += timedelta(seconds=seconds)

    @rule(kind=st.sampled_from(["docs", "target", "source", "canary"]))
    def a_person_commits(self, kind: str) -> None:
        if kind == "docs":
            after = self.text.replace("# Ports:", "# Ports (runbook):") if "# Ports:" in self.text else \
                self.text.replace("# Ports (runbook):", "# Ports:")
        else:
            wanted = {"target": self.backends["candle"], "source": self.backends["vllm"], "canary": CANARY}[kind]
            after = edit(self.text, wanted)
        self.history.append(Commit("person", self.text, after))
        self.text = after

    @rule()
    def argocd_syncs(self) -> None:
        self.live = selector(self.text)

    # --- the Job ----------------------------------------------------------------------------------------------

    @rule()
    def the_job_is_killed(self) -> None:
        self.job = None

    @rule()
    def the_job_proves(self) -> None:
        """A Job starts if none runs, and proves (prove_backend): every Ready pod the target selects is asked for
        every name; a proof counts only when at least minReadyPods answered them all, and then it is the Job's
        proof (replacing the older one)."""
        self.job = {} if self.job is None else self.job
        answered = [pod for pod in self._selected() if pod.ready and pod.names >= NAMES]
        for pod in answered:
            pod.proved_at = self.now  # the oracle's own record
        if len(answered) >= self.min_ready:
            self.job = {pod.name: self.now for pod in answered}

    @precondition(lambda self: bool(self.job))
    @rule(gap=st.integers(0, 120), flip=st.none() | st.integers(0, 5))
    def the_job_commits(self, gap: int = 0, flip: int | None = None) -> None:
        """PostSync's choice on what it observed, then the writer's read → decide → edit, with the gate right
        before the write (phases._before_write). `gap` seconds pass between the proof and the write (the CAS
        loop, a slow host); with `flip`, a pod's readiness changes in that gap."""
        assert self.job is not None
        if not isinstance(decide.next_step(self._observed(), self.plan), steps.Advance):
            self.job = None  # Git at the target already: verify or wait for ArgoCD, never commit
            return
        self.time_passes(gap)
        if flip is not None and self.pods:
            pod = self.pods[sorted(self.pods)[flip % len(self.pods)]]
            pod.ready = not pod.ready
        target = self.backends["candle"]
        step = switch.git_step(selector(self.text), target=target, known=[self.backends["vllm"]])
        if step is not switch.GitStep.WRITE:  # already there, or someone else's selector: no commit
            self.job = None
            return
        for attempt in range(2):
            verdict = gate.judge(self._views(), target="candle", backends=self.backends, proven=self.job,
                                 now=self.now, min_ready=self.min_ready)
            if verdict.open or verdict.foreign or attempt:
                break
            self.the_job_proves()
        if not verdict.open:
            self.job = None  # exit 3 or 4: nothing written
            return
        after = edit(self.text, target)  # edit_selector, with its guard
        good, foreign = self._oracle(target)
        self.history.append(Commit("cutover", self.text, after, good=good, foreign=foreign))
        self.text = after
        EXPLORED["commits"] += 1

    @rule(gap=st.integers(0, 120), flip=st.none() | st.integers(0, 5))
    def a_job_runs_through(self, gap: int, flip: int | None) -> None:
        """The whole story in one step, so that histories reach commits often; the steps above interleave."""
        self.the_job_proves()
        if self.job:
            self.the_job_commits(gap, flip)

    # --- the guarantees ---------------------------------------------------------------------------------------

    @invariant()
    def every_commit_of_ours_was_earned(self) -> None:  # docs/guarantees.md #1
        for commit in self.history:
            if commit.by == "cutover":
                assert commit.good >= self.min_ready and commit.foreign == 0, commit

    @invariant()
    def a_commit_changes_only_the_selector(self) -> None:  # docs/guarantees.md #2
        for commit in self.history:
            if commit.by == "cutover":
                assert commit.rest_kept and commit.selectors[1] == self.backends["candle"]

    @invariant()
    def never_a_second_or_a_wrong_commit(self) -> None:  # docs/guarantees.md #5
        for commit in self.history:
            if commit.by == "cutover":
                before, after = commit.selectors
                assert before != after, "a commit that changes nothing"
                assert before == self.backends["vllm"], "someone else's selector overwritten"

    # --- helpers ----------------------------------------------------------------------------------------------

    def _observed(self) -> steps.Observed:
        """What a PostSync reads: the live Service, Git's selector, the last cutover commit's trailers."""
        live = ServiceView("llm-serving", "reasoning-long-predictor", "uid-1", "10.96.0.1", self.live, ())
        ours = [commit for commit in self.history if commit.by == "cutover"]
        last = GitCommit("c" * 40, "cutover", "cutover", None, Trailers(id="i", source="vllm", to="candle",
                                                                         plan=PLAN.name)) if ours else None
        return steps.Observed(live, selector(self.text), last)

    def _selected(self) -> list[Pod]:
        target = self.backends["candle"]
        return [pod for pod in self.pods.values() if all(pod.labels.get(k) == v for k, v in target.items())]

    def _views(self) -> list[PodView]:
        return [PodView(namespace="llm-serving", name=pod.name, uid=pod.name, labels=pod.labels, phase="Running",
                        ip="10.0.0.1", ready=pod.ready) for pod in self._selected()]

    def _oracle(self, target: dict[str, str]) -> tuple[int, int]:
        """Counted from the world, not from the Job's view: Ready pods the selector picks that proved every name
        within 60 s, and pods of the other backend it picks."""
        picked = self._selected()
        good = sum(1 for pod in picked if pod.ready and pod.proved_at is not None
                   and (self.now - pod.proved_at).total_seconds() <= 60)
        vllm = self.backends["vllm"]
        foreign = sum(1 for pod in picked if all(pod.labels.get(k) == v for k, v in vllm.items()))
        return good, foreign


# 300 histories in the suite; `make soak` runs 10,000 (CUTOVER_HISTORIES), outside CI.
Cutover.TestCase.settings = settings(max_examples=int(os.environ.get("CUTOVER_HISTORIES", "300")),
                                     stateful_step_count=50, deadline=None,
                                     suppress_health_check=[HealthCheck.too_slow])


class TestCutoverHistories(Cutover.TestCase):  # type: ignore[misc,valid-type]
    @classmethod
    def teardown_class(cls) -> None:
        assert EXPLORED["commits"] >= 20, f"the histories reached only {EXPLORED['commits']} commits"


@pytest.mark.parametrize(("ready", "age", "min_ready", "open_"), [
    (True, 10, 1, True), (True, 61, 1, False), (False, 10, 1, False), (True, 10, 2, False)])
def test_the_gate(ready: bool, age: int, min_ready: int, open_: bool) -> None:
    now = datetime(2026, 11, 30, tzinfo=UTC)
    pod = PodView(namespace="n", name="p", uid="u", labels=dict(PLAN.backends["candle"].selector), ready=ready)
    verdict = gate.judge([pod], target="candle", backends={"candle": PLAN.backends["candle"].selector,
                                                           "vllm": PLAN.backends["vllm"].selector},
                         proven={"p": now - timedelta(seconds=age)}, now=now, min_ready=min_ready)
    assert verdict.open is open_ and (verdict.short is None) is open_
