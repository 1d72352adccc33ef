"""Engine kinds, one row each, and what their answers mean. Pure data: no I/O.

The facts behind each row, with their sources, are in docs/engines.md: vLLM and candle-vllm refuse connections until
fully loaded (refused = still starting); vLLM lists every --served-model-name and 404s unknown names; candle-vllm
has no /health (404 = no such endpoint, not unhealthy), lists exactly one id and accepts any model name, so
only a one-token generation proves an alias. The plan names the kinds it accepts (`plan.ENGINES`), a row each
here; `engines.api` speaks HTTP by these rows, and what a proof found (`core.proofs`) is judged by `kube.readiness`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Collection, Iterable, Mapping

from cutover.core.proofs import Problem

__all__ = ["ENGINES", "HINTS", "Profile", "answered_by", "loaded", "method_for"]


@dataclasses.dataclass(frozen=True)
class Profile:
    engine: str
    health_path: str | None  # None: the engine has no health endpoint
    lists_every_name: bool  # /v1/models holds every served name (else one id only)
    generate_path: str
    chat: bool  # the generation route takes chat messages rather than a prompt
    in_flight: str | None = None  # the /metrics gauge of requests running (docs/capacity.md); None: no such gauge
    owned_by: str | None = None  # what its /v1/models cards say in `owned_by`; None: nothing of its own (a model id)
    any_name: bool = False  # answers any model name it is asked (candle-vllm): a name proves nothing of the weights


ENGINES: Mapping[str, Profile] = {profile.engine: profile for profile in (
    Profile("vllm", "/health", True, "/v1/completions", chat=False, in_flight="vllm:num_requests_running",
            owned_by="vllm"),
    Profile("candle-vllm", None, False, "/v1/chat/completions", chat=True, owned_by="candle-vllm", any_name=True),
    Profile("sglang", "/health", False, "/v1/completions", chat=False, owned_by="sglang"),
    Profile("llama.cpp", "/health", False, "/v1/completions", chat=False, owned_by="llamacpp"),
    Profile("tgi", "/health", False, "/v1/chat/completions", chat=True),
    Profile("openai", None, False, "/v1/chat/completions", chat=True),  # any OpenAI-compatible server
)}


def method_for(engine: str, proof: str) -> str:
    """`listed` or `generate`: `auto` lists where the engine lists every name, else generates."""
    if proof != "auto":
        return proof
    return "listed" if ENGINES[engine].lists_every_name else "generate"


def answered_by(engine: str, owners: Collection[str]) -> Problem | None:
    """Whether the engine that answered (the `owned_by` of its /v1/models cards) is of the kind expected; None also
    when that kind names no owner of its own and cannot be told apart. Retryable: kube-proxy may still lead to the
    old pods for a while after a switch."""
    expected = ENGINES[engine].owned_by
    if expected is None or expected in owners:
        return None
    found = ", ".join(sorted(owners)) or "an engine that names no owner"
    return Problem("wrong_engine", f"answered by {found} (owned_by in /v1/models), not {engine}", retryable=True)


def loaded(model: str, cards: Iterable[Mapping[str, object]]) -> Problem | None:
    """Whether /v1/models reports `model` (`backends.<name>.model`) as a card's id or root: the pods loaded the
    weights meant. Final: a pod that answers has loaded what it will serve."""
    if any(model in (card.get("id"), card.get("root")) for card in cards):
        return None
    reported = sorted({str(value) for card in cards for value in (card.get("id"), card.get("root")) if value})
    return Problem("model_not_loaded", f"/v1/models reports {', '.join(reported) or 'no model'}, not the model "
                                       f"{model!r}", retryable=False)


HINTS: Mapping[str, str] = {
    "name_not_listed": "add the name to the engine's --served-model-name, or remove it from verify.servedNames",
    "name_rejected": "the engine refuses this model name; check its served names",
    "too_large": "the engine's answer exceeds 1 MiB; is this port really the engine's API?",
    "refused": "nothing listens on the backend port; check backends.<name>.port and the container's port",
    "connect_timeout": "packets to the pod are dropped: check NetworkPolicies and the Job's egress",
    "read_timeout": "the engine accepts connections but does not answer; raise verify.requestTimeout",
    "reset": "the engine closed the connection; read its logs",
    "unhealthy": "the engine reports itself unhealthy; read its logs",
    "http_status": "the engine answered with an error; read its logs",
    "bad_json": "the answer is not the engine's API; check the backend port and engine",
    "bad_encoding": "the engine's answer cannot be decoded (a broken gzip body?); read its logs, check proxies",
    "no_token": "the engine answered without generating; read its logs",
    "model_not_loaded": "the pods loaded other weights than backends.<name>.model says: check the engine's --model "
                        "(vLLM) or --m/--w (candle-vllm), or the plan",
    "wrong_engine": "the Service still leads to another engine's pods: compare its EndpointSlices with the target's "
                    "pods, and look for a proxy or mesh in the data path that pins connections to old pods",
}
