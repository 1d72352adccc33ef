"""The `Cutover-*` trailers: one dataclass renders and parses them, and a round trip keeps every field."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from cutover.core.trailers import Trailers

WORDS = st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789-.", min_size=1, max_size=20)


def test_render_in_the_documented_order() -> None:
    rendered = Trailers(id="c0ffee", source="vllm", to="candle", plan="reasoning-long", service_uid="u1",
                        cluster_ip="10.0.0.1", hold="vllm").render()
    assert rendered.splitlines() == ["Cutover-Id: c0ffee", "Cutover-From: vllm", "Cutover-To: candle",
                                     "Cutover-Plan: reasoning-long", "Cutover-Service-Uid: u1",
                                     "Cutover-Cluster-Ip: 10.0.0.1", "Cutover-Hold: vllm"]


def test_an_unknown_source_renders_as_unknown_and_parses_as_none() -> None:
    rendered = Trailers(id="i", to="candle", plan="p").render()
    assert "Cutover-From: unknown" in rendered and "Cutover-Hold" not in rendered
    assert Trailers.parse("title\n\n" + rendered).source is None


def test_a_message_without_trailers_has_none() -> None:
    parsed = Trailers.parse("Update the docs\n\nCutover-To: in the body, not the last paragraph\n\nSigned-off-by: x")
    assert parsed == Trailers() and not parsed.is_cutover


@given(id_=WORDS, source=st.none() | WORDS, to=WORDS, plan=WORDS, uid=st.none() | WORDS, ip=st.none() | WORDS,
       hold=st.none() | WORDS)
def test_a_round_trip_keeps_every_field(id_: str, source: str | None, to: str, plan: str, uid: str | None,
                                        ip: str | None, hold: str | None) -> None:
    if source == "unknown":
        source = None
    trailers = Trailers(id=id_, source=source, to=to, plan=plan, service_uid=uid, cluster_ip=ip, hold=hold)
    message = f"cutover(x): a -> b\n\nProven: a body.\n\n{trailers.render()}\n"
    assert Trailers.parse(message) == trailers
    assert Trailers.parse(message).as_dict() == {line.split(": ")[0]: line.split(": ", 1)[1]
                                                 for line in trailers.render().splitlines()
                                                 if not line.endswith(": unknown")}
