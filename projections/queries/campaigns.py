"""Reads of campaigns: each with its runs' state, its sims as job_status.py lists jobs, and a
stat's table, trace by config, as get_stats.py writes one.

A campaign's configs and replicas are its runs' entries (`cascade_core/campaigns.py`), its
state theirs. A table's cell is the mean over the cell's sims that succeeded having simulated
every launch: a sim pending, running, failed, cancelled or cut short counts for nothing, so a
cell never looks finished before it is.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import cast
from statistics import fmean

from cascade_api.campaigns import CampaignDetail, CampaignSim, CampaignSummary, CampaignTable, CampaignTableRow
from cascade_core import events as ev
from cascade_core.campaigns import BadCampaign, CampaignFacts
from cascade_core.gpu_configs import config_labels
from cascade_core.run import RunState, run_state
from cascade_core.sims import SIM_STATES
from cascade_formats import stat_kinds
from projections.queries.convert import from_row
from projections.queries.runs import CURRENT_KERNELS, Con, _select, configs, snapshot
from projections.rows import CampaignRow, CampaignRunRow, RunRow, SimRow, TraceRow

# A sim's totals as it last printed them, which its row holds: read there, not from its kernels.
SIM_TOTALS = ("gpu_tot_sim_cycle", "gpu_tot_sim_insn", "gpu_tot_ipc")


class _Campaign:
    """A campaign's row, its runs' rows in the order they were added, and their sims."""

    def __init__(self, row: CampaignRow, runs: list[tuple[CampaignRunRow, RunRow]], sims: list[SimRow]) -> None:
        self.row = row
        self.runs = runs
        self.configs = list(dict.fromkeys(c for _, run in runs for c in configs(run.run)))
        order = {r.run_id: i for i, (r, _) in enumerate(runs)}
        place = {c: i for i, c in enumerate(self.configs)}
        self.sims = sorted(
            (s for s in sims if s.reference_for is None), key=lambda s: (order[s.run_id], place[s.gpu_config], s.replica)
        )
        self.trace_of = {r.run_id: r.trace_id for r, _ in runs}


def _load(con: Con, row: CampaignRow) -> _Campaign:
    links = _select(con, CampaignRunRow, "campaign_id = ? ORDER BY seq, position", [row.id])
    runs = {r.id: r for r in _select(con, RunRow, "id IN (SELECT unnest(?))", [[link.run_id for link in links]])}
    sims = _select(con, SimRow, "run_id IN (SELECT unnest(?))", [list(runs)])
    return _Campaign(row, [(link, runs[link.run_id]) for link in links if link.run_id in runs], sims)


def _find(con: Con, key: str) -> CampaignRow | None:
    """The campaign whose id or name is `key`."""
    rows = _select(con, CampaignRow, "id = ? OR name = ? ORDER BY id = ? DESC", [key, key, key])
    return rows[0] if rows else None


def _replicas(campaign: _Campaign) -> int:
    return max(Counter((s.run_id, s.gpu_config) for s in campaign.sims).values(), default=0)


def _summary(campaign: _Campaign) -> CampaignSummary:
    counts = Counter(s.state for s in campaign.sims)
    row = campaign.row
    return CampaignSummary(
        id=row.id, name=row.name, created_at=row.created_at, state=cast(RunState, run_state(counts)),
        traces=[link.trace_id for link, _ in campaign.runs], configs=campaign.configs, replicas=_replicas(campaign),
        runs=[link.run_id for link, _ in campaign.runs], sim_counts={s: counts[s] for s in SIM_STATES if counts[s]},
        tags=list(row.tags), baseline=row.baseline,
    )


def campaigns(con: Con) -> list[CampaignSummary]:
    """Every campaign, newest first."""
    with snapshot(con):
        rows = _select(con, CampaignRow, "true ORDER BY created_at DESC, id DESC", [])
        return [_summary(_load(con, row)) for row in rows]


def campaign_detail(con: Con, key: str) -> CampaignDetail | None:
    with snapshot(con):
        row = _find(con, key)
        if row is None:
            return None
        campaign = _load(con, row)
        sims = [
            from_row(CampaignSim, s, sim_id=s.id, trace_id=campaign.trace_of[s.run_id], cut_short=s.cut_short is not None)
            for s in campaign.sims
        ]
        summary = _summary(campaign)
        return CampaignDetail(**{f: getattr(summary, f) for f in CampaignSummary.__struct_fields__}, sims=sims)


def campaign_facts(con: Con, key: str) -> CampaignFacts | None:
    """What a top-up decides on."""
    row = _find(con, key)
    if row is None:
        return None
    campaign = _load(con, row)
    runs = [ev.CampaignRun(run_id=link.run_id, trace_id=link.trace_id) for link, _ in campaign.runs]
    return CampaignFacts(id=row.id, name=row.name, tags=list(row.tags), runs=runs, configs=campaign.configs, replicas=_replicas(campaign))


def _kernel_values(con: Con, sim_ids: list[str], name: str, how: str) -> dict[str, float]:
    """Each sim's `how` (an aggregate over its current kernels in launch order) of stat `name`."""
    found = con.execute(
        f"""SELECT k.sim_id, {how} FROM {CURRENT_KERNELS} JOIN kernel_stats v ON v.seq = k.seq JOIN stat_names n ON n.id = v.stat
            WHERE k.sim_id IN (SELECT unnest(?)) AND n.name = ? AND v.value IS NOT NULL GROUP BY k.sim_id""",
        [sim_ids, name],
    ).fetchall()
    return {sim_id: float(value) for sim_id, value in found if value is not None}


def sim_values(con: Con, sims: Sequence[SimRow], stat: str) -> dict[str, float]:
    """Each sim's value of `stat` (as `CampaignTable` says), by sim id; a sim without it is left out."""
    if stat in SIM_TOTALS:
        return {s.id: value for s in sims if (value := getattr(s, stat)) is not None}
    ids = [s.id for s in sims]
    kind = stat_kinds.kind_of(stat)
    if kind == "snapshot":
        return _kernel_values(con, ids, stat, "arg_max(v.value, k.kernel_index)")
    parts = stat_kinds.ratio_parts(stat) if kind == "ratio_of_totals" else None
    if parts is None:
        return _kernel_values(con, ids, stat, "sum(v.value)")
    numerator, denominator = (_kernel_values(con, ids, part, "sum(v.value)") for part in parts)
    return {sim_id: n / denominator[sim_id] for sim_id, n in numerator.items() if denominator.get(sim_id)}


def _trace_names(con: Con, trace_ids: list[str]) -> dict[str, str]:
    return {t.id: t.model or t.id for t in _select(con, TraceRow, "id IN (SELECT unnest(?))", [trace_ids])}


def _labelled(campaign: _Campaign) -> tuple[list[str], dict[str, str]]:
    """The table's configs, in the campaign's order, and each sim's config as the table shows
    it, by sim id: its name, or `NAME@<6 hex>` where the campaign's sims of that name ran
    files of more than one digest (`gpu_configs.config_labels`), so that they are never
    pooled in one cell."""
    labels = config_labels((s.id, s.gpu_config, s.config_digests) for s in campaign.sims)
    shown: list[str] = []
    for name in campaign.configs:
        shown += list(dict.fromkeys(labels[s.id] for s in campaign.sims if s.gpu_config == name)) or [name]
    return shown, labels


def campaign_table(con: Con, key: str, stat: str, baseline: str | None) -> CampaignTable | None:
    """`stat` per trace and config, normalised to `baseline` (else the campaign's own)."""
    with snapshot(con):
        row = _find(con, key)
        if row is None:
            return None
        campaign = _load(con, row)
        baseline = baseline or row.baseline
        shown, labels = _labelled(campaign)
        if baseline is not None and baseline not in campaign.configs and baseline not in shown:
            raise BadCampaign(f"baseline {baseline} is not one of campaign {row.name}'s configs ({', '.join(shown)})")
        counted = [s for s in campaign.sims if s.state == "succeeded" and s.cut_short is None]
        values = sim_values(con, counted, stat)
        cells: dict[tuple[str, str], list[float]] = {}
        for s in counted:
            if s.id in values:
                cells.setdefault((s.run_id, labels[s.id]), []).append(values[s.id])
        names = _trace_names(con, [link.trace_id for link, _ in campaign.runs])
        rows = []
        for link, _ in campaign.runs:
            base_cell = cells.get((link.run_id, baseline)) if baseline is not None else None
            base_value = fmean(base_cell) if base_cell else None
            for config in shown:
                cell = cells.get((link.run_id, config), [])
                value = fmean(cell) if cell else None
                rows.append(
                    CampaignTableRow(
                        trace_id=link.trace_id, trace_name=names.get(link.trace_id, link.trace_id), config=config, value=value,
                        baseline_value=base_value, normalised=value / base_value if value is not None and base_value else None,
                        sims=len(cell),
                    )
                )
        return CampaignTable(campaign=row.name, stat=stat, baseline=baseline, rows=rows)
