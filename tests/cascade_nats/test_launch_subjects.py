"""Where launch requests live: on their config's subject since placement by config, on the
one subject every runner consumed before, and each decodes only where it belongs."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from cascade_core import events as ev
from cascade_nats import subjects

AT = datetime(2026, 12, 1, tzinfo=UTC)


def request(*, by_config: bool, config: str = "SM61_TITANX") -> ev.SimQueued:
    return ev.SimQueued(
        id="s.queued", at=AT, run_id="run-1", sim_id="sim-1", trace_id="t", gpu_config=config, kernels_total=3, by_config=by_config
    )


def test_a_request_placed_by_config_is_on_its_configs_subject_and_an_older_one_where_it_was() -> None:
    placed, older = request(by_config=True), request(by_config=False)
    assert subjects.of(placed) == "cascade.ev.run.run-1.sim.sim-1.queued.SM61_5FTITANX"
    assert subjects.of(older) == "cascade.ev.run.run-1.sim.sim-1.queued"
    assert b'"by_config"' not in ev.encode(older), "an older request reads as it was stored"
    for event in (placed, older):
        assert subjects.decode(subjects.of(event).encode(), ev.encode(event)) == event
    with pytest.raises(ev.Unreadable, match="belongs on"):
        subjects.decode(subjects.of(older).encode(), ev.encode(placed))
    # one sim's requests on either subject, and of another config: each judged by its own
    stored = [placed, older, request(by_config=True, config="SM7_QV100")]
    assert subjects.all_belong(stored, [subjects.of(e).encode() for e in stored])
    assert not subjects.all_belong(stored[::-1], [subjects.of(e).encode() for e in stored])


def test_a_configs_consumer_filters_its_requests_only() -> None:
    assert subjects.launch_requests("SM61_TITANX") == "cascade.ev.run.*.sim.*.queued.SM61_5FTITANX"
    assert subjects.launch_consumer("SM61_TITANX") == "launch-SM61_5FTITANX"
    assert subjects.LEGACY_LAUNCH_REQUESTS == "cascade.ev.run.*.sim.*.queued"  # one token short of every placed one
