"""A run's total cycles per config, as the runs list shows them: only replicas whose total is
of every launch, and never two configs' files pooled under one name."""

from __future__ import annotations

from datetime import UTC, datetime

from cascade_api.models import ConfigCycles, RunEntry, RunSummary
from cascade_core.gpu_configs import LABEL_HEX, config_digest
from projections.queries.runs import Replica, cycles_by_config

OLD = {"gpgpusim.config": "a" * 64}
EDITED = {"gpgpusim.config": "b" * 64}


def _run(*configs: str) -> RunSummary:
    return RunSummary(
        id="run-1", trace_id="t", created_at=datetime(2026, 12, 4, tzinfo=UTC), state="succeeded",
        entries=[RunEntry(gpu_config=c, count=3) for c in configs], sim_counts={"succeeded": 6}, sample=False,
    )


def test_cycles_are_each_configs_median_least_and_most_in_the_order_of_its_entries() -> None:
    replicas = [
        Replica("s1", "B", OLD, 300.0), Replica("s2", "B", OLD, 100.0), Replica("s3", "B", OLD, 200.0),
        Replica("s4", "A", OLD, 50.0),
    ]
    assert cycles_by_config(_run("A", "B"), replicas) == [
        ConfigCycles(gpu_config="A", sims=1, median=50.0, min=50.0, max=50.0),
        ConfigCycles(gpu_config="B", sims=3, median=200.0, min=100.0, max=300.0),
    ]


def test_a_replica_without_a_whole_total_counts_for_none_and_a_config_with_none_is_left_out() -> None:
    # Failed, cancelled, running and cut-short sims come as None (the query's CASE).
    replicas = [Replica("s1", "A", OLD, None), Replica("s2", "A", OLD, 80.0), Replica("s3", "B", None, None)]
    assert cycles_by_config(_run("A", "B"), replicas) == [ConfigCycles(gpu_config="A", sims=1, median=80.0, min=80.0, max=80.0)]


def test_replicas_of_a_config_edited_between_them_are_totalled_apart_under_their_labels() -> None:
    replicas = [Replica("s1", "A", OLD, 100.0), Replica("s2", "A", EDITED, 140.0), Replica("s3", "A", EDITED, 160.0)]
    old, edited = (f"A@{config_digest(files)[:LABEL_HEX]}" for files in (OLD, EDITED))
    assert cycles_by_config(_run("A"), replicas) == [
        ConfigCycles(gpu_config=old, sims=1, median=100.0, min=100.0, max=100.0),
        ConfigCycles(gpu_config=edited, sims=2, median=150.0, min=140.0, max=160.0),
    ]
