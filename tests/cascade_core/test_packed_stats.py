"""Stats maps packed as events carry them (`cascade_core/packed_stats.py`): what goes in comes
out, and the maps `sim.kernel_finished.v1` carried as JSON are read as the read model stored
them."""

from __future__ import annotations

import math
from datetime import UTC, datetime
from typing import Any

import msgspec

from cascade_core import events as ev
from cascade_core import packed_stats, stats_v1
from cascade_nats import deflated
from tests.corpus import corpus
from tests.support import same_map


def test_a_map_comes_back_as_it_went_in() -> None:
    stats: dict[str, Any] = {"kernel_name": "_Z1kv", "a": 1.5, "b": -0.0, "c": math.inf, "d": math.nan, "e": "none", "f": None, "g": "x", "h": 2.0}
    packed = packed_stats.from_mapping(stats)
    assert packed is not None and packed.texts == {0: "_Z1kv", 6: None, 7: "x"}  # `none` is a nan of its own
    back = deflated.stats_map(packed)
    assert back["e"] == "none" and isinstance(back["d"], float) and math.isnan(back["d"])
    assert same_map(back, stats) and math.copysign(1, back["b"]) == -1  # type: ignore[arg-type]  # b is a float
    assert ev.decode(ev.encode(_kernel(packed))) == _kernel(packed)


def test_maps_of_the_same_names_carry_the_same_names_text() -> None:
    one, two = packed_stats.from_mapping({"a": 1.0, "b": 2.0}), packed_stats.from_mapping({"a": 3.0, "b": 4.0})
    other = packed_stats.from_mapping({"b": 1.0, "a": 2.0})
    assert one is not None and two is not None and other is not None
    assert one.names == two.names != other.names
    assert packed_stats.names_of(other) == ("b", "a")


def test_a_map_sent_with_its_digest_alone_is_read_once_given_its_names_again() -> None:
    packed = packed_stats.from_mapping({"a": 1.0, "b": "none"})
    assert packed is not None and packed.names_digest
    alone = packed_stats.without_names(packed)
    assert alone.names == "" and alone.names_digest == packed.names_digest
    assert len(ev.encode(_kernel(alone))) < len(ev.encode(_kernel(packed)))
    try:
        packed_stats.names_of(alone)
        raise AssertionError("a map without its names has none to give")
    except ValueError as err:
        assert packed.names_digest in str(err)
    assert deflated.stats_map(packed_stats.with_names(alone, packed.names)) == {"a": 1.0, "b": "none"}


def test_json_values_are_read_as_the_read_model_stored_them() -> None:
    raw = b'{"kernel_name":"k","n":3,"x":1.5,"nan":"NaN","inf":"Infinity","ninf":"-Infinity","t":"none","z":null,"o":[1,true]}'
    packed = stats_v1.packed(raw, "k")
    assert packed is not None
    expected = {"kernel_name": "k", "n": 3.0, "x": 1.5, "nan": math.nan, "inf": math.inf, "ninf": -math.inf, "t": "none", "z": None, "o": "[1,true]"}
    assert same_map(deflated.stats_map(packed), expected)
    assert stats_v1.packed(b"{}", "k") is None and stats_v1.packed(b"[1]", "k") is None  # no map, as before: no rows


def test_every_recorded_v1_kernel_result_is_read_with_its_map_packed() -> None:
    found = 0
    for line in corpus.every_line():
        data = corpus.data(line)
        if msgspec.json.decode(data, type=dict[str, Any])["type"] != "sim.kernel_finished.v1":
            continue
        found += 1
        stored = msgspec.json.decode(data, type=dict[str, Any])["stats"]
        event = ev.decode(data)
        assert isinstance(event, ev.KernelFinished)
        if not stored:
            assert event.stats is None
            continue
        assert event.stats is not None
        wanted = {k: float(v) if isinstance(v, (int, float)) else {"NaN": math.nan, "Infinity": math.inf}.get(v, v) for k, v in stored.items()}
        assert same_map(deflated.stats_map(event.stats), wanted)
    assert found


def _kernel(stats: packed_stats.PackedStats) -> ev.KernelFinished:
    return ev.KernelFinished(
        id="e", at=datetime(2026, 12, 1, tzinfo=UTC), run_id="r", sim_id="s", attempt=1, kernel_index=0, uid=1,
        name="_Z1kv", gpu_sim_cycle=1, gpu_sim_insn=1, gpu_ipc=1.0, sim_time_ns=1.0, stats=stats, stats_naming=2,
    )

