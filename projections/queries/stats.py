"""Reads of a run's kernel stats by name: the names its kernels have (a catalogue), and one
stat's values per kernel and config, as the API's Structs.

Names are docs/stats-naming.md's. In the name asked for, `[*]` stands for any index, so
`L2_cache_bank[*].Miss_rate` is the table of every L2 bank's miss rate and
`maximum service time to same row.dram[*][*]` the one of every DRAM channel and bank. An
index is a unit's number however the log spells it: in brackets (`dram[2]`), or ending a
part of the name after a space or a letter (`Memory Partition 3.bw_util`, `Class 0`,
`Memory Partition 3.bk10.a`, `single_issue_nums.WS1`): `Memory Partition [*].bw_util` is the
table of every DRAM channel's `bw_util`.

Both read `kernel_stats` (a row per value, its name an id of `stat_names`), over the rows
between the run's first and last kernels' seqs, which DuckDB's zone maps skip to. Only the
current attempt of a sim counts. bench/README.md has the cost on 10,000 kernels of 1,300
stats each: each answer takes a scan of the stat ids of those rows, 100 to 300 ms on 2 busy
cores. A stat's values are read a part of the kernel indices at a time, the part's kernels
first and then their rows, and folded into the answer here: the memory a read takes is a
part's, however long the run.
"""

from __future__ import annotations

import math
import re
import statistics
from collections.abc import Mapping

import msgspec
import pyarrow as pa

from cascade_formats import derived_metrics, stat_kinds
from cascade_formats.kernel_names import short_name
from cascade_api.models import (
    OptionsFrom,
    DerivedConfig,
    DerivedKernel,
    DerivedMetrics,
    RunSummary,
    StatCatalogue,
    StatName,
    StatTable,
    StatValues,
    StatValuesRow,
)
from projections.database import registered
from projections.queries.convert import one_row
from projections.queries.runs import CURRENT_KERNELS, RECOMPUTED_TOTALS, Con, labels_of, snapshot
from projections.stats_rows import ratio_part_ids

CATALOGUE_LIMIT = 200  # names in a catalogue's answer
VALUES_LIMIT = 50_000  # rows in a values answer
MAX_NAME = 500  # characters of a name or search

ANY_INDEX = "[*]"
# A unit's number: bracketed, or the digits ending a part of the name after a space or a letter.
_INDEX = re.compile(r"\[([0-9]+)\]|(?<=[A-Za-z ])([0-9]+)(?=\.|$)")
_SPECIAL = re.compile(r"[\\.^$|?*+()\[\]{}]")


class BadName(ValueError):
    """A name or search the API refuses (422), saying why."""


def _regex(text: str, index: str) -> str:
    """`text` as a regular expression (RE2, DuckDB's) matching itself, with each `[*]` as `index`."""
    return index.join(_SPECIAL.sub(lambda m: "\\" + m.group(), part) for part in text.split(ANY_INDEX))


def _checked(text: str, what: str) -> str:
    if len(text) > MAX_NAME:
        raise BadName(f"{what} is over {MAX_NAME} characters")
    if "*" in text.replace(ANY_INDEX, ""):
        raise BadName(f"{what} may hold * only as [*], for any index: {text[:100]!r}")
    return text


def search_pattern(q: str) -> str:
    """The names a search `q` finds: those holding it, ignoring case, `[*]` any index."""
    return _regex(_checked(q, "q"), r"(?:\[[0-9]+\]|[0-9]+)")


def name_pattern(name: str) -> str:
    """The names `name` stands for, each `[*]` two groups, one of which captures its index
    (bracketed or bare: `unit_numbers` reads them)."""
    if not name:
        raise BadName("name is required: a stat's name, with [*] for any index")
    return _regex(_checked(name, "name"), r"(?:\[([0-9]+)\]|([0-9]+))")


def unit_numbers(pattern: re.Pattern[str], name: str) -> list[int]:
    """The indices of `name` that `pattern` (a `name_pattern`) has as `[*]`."""
    match = pattern.fullmatch(name)
    assert match is not None, name  # DuckDB found it by the same expression
    groups = match.groups()
    return [int(bracketed if bracketed is not None else bare) for bracketed, bare in zip(groups[0::2], groups[1::2])]


def natural(name: str) -> list[str | int]:
    """The order of names: by their text, indices as numbers (`[2]` before `[10]`,
    `Memory Partition 2` before `Memory Partition 10`)."""
    parts: list[str | int] = []
    start = 0
    for match in _INDEX.finditer(name):
        parts += [name[start : match.start(match.lastindex or 0)], int(match.group(match.lastindex or 0))]
        start = match.end(match.lastindex or 0)
    return [*parts, name[start:]]


def table_name(name: str) -> str:
    """The per-unit table a name belongs to: each of its indices as `[*]`."""
    return _INDEX.sub(ANY_INDEX, name)


# The run's current kernels (a fast sim's reference is no replica of its config, as in the
# comparison), each config as the comparison shows it (`runs.labels_of`: $sims of a config
# of several digests, by their $labels), and the seqs its kernels' rows of kernel_stats lie between.
def _run_kernels(columns: str = "") -> str:
    return (
        f"SELECT k.seq, k.kernel_index, k.name, coalesce(l.label, s.gpu_config) AS gpu_config, s.replica{columns} "
        f"FROM {CURRENT_KERNELS} LEFT JOIN (SELECT unnest($sims::VARCHAR[]) AS sim_id, unnest($labels::VARCHAR[]) AS label) l ON l.sim_id = s.id "
        "WHERE s.run_id = $run AND s.reference_for IS NULL"
    )


def _labels(con: Con, run: RunSummary) -> tuple[dict[str, object], list[str]]:
    """The parameters `_run_kernels` takes for the run's labels, and its configs in order."""
    labelled = labels_of(con, run)
    return {"sims": list(labelled.apart), "labels": list(labelled.apart.values())}, labelled.configs


_RUN_KERNELS = _run_kernels()
_SEQS = f"SELECT min(k.seq), max(k.seq) FROM {CURRENT_KERNELS} WHERE s.run_id = ?"
_LAST_INDEX = f"SELECT coalesce(max(k.kernel_index), -1) FROM {CURRENT_KERNELS} WHERE s.run_id = ?"
GROUPS_AT_ONCE = 8192  # rows of a values answer one query reads (each with its replicas)

# Per name that holds $q, each config's kernel indices with a kernel that has it. A kernel's
# names are its rows' stat ids, and kernels of one name and config mostly have the same ones:
# so each kernel's set of ids becomes one number (the xor of their hashes, grouping the rows
# by seq alone), a kernel index the list of those its replicas have, and each such set is
# read by its names once, from one kernel that has it (two sets share a number by a chance of
# 1 in 2^64). Counting distinct kernel indices over every row instead groups them by stat and
# kernel, which is several times slower (bench/README.md). Three queries, the kernels' sets
# and each set's names brought back between them: in one, DuckDB could not tell how few sets
# there are, and once built a join's table of kernel_stats' rows, more than 64 MiB.
_LAYOUTS = f"""
WITH run_kernels AS ({_RUN_KERNELS})
SELECT r.seq, r.gpu_config, r.kernel_index, l.layout
FROM (SELECT seq, bit_xor(hash(stat)) AS layout FROM kernel_stats WHERE seq BETWEEN $first AND $last GROUP BY seq) l
JOIN run_kernels r USING (seq)"""
# The names that hold $q of the kernels $seqs.
_NAMES_OF = """SELECT v.seq, n.name FROM kernel_stats v JOIN stat_names n ON n.id = v.stat
WHERE v.seq BETWEEN $first AND $last AND v.seq IN (SELECT unnest($seqs)) AND regexp_matches(n.name, $q, 'i')"""
# Over `layouts` (as `_LAYOUTS` gives them) and `layout_names` (each set's names).
_CATALOGUE = """
WITH groups AS (SELECT gpu_config, layouts, count(*) AS kernels
           FROM (SELECT gpu_config, kernel_index, list(DISTINCT layout ORDER BY layout) AS layouts FROM layouts GROUP BY ALL)
           GROUP BY ALL),
names AS (SELECT layout, name FROM layout_names),
counts AS (SELECT name, gpu_config, sum(kernels) AS kernels
           FROM (SELECT DISTINCT g.gpu_config, g.layouts, g.kernels, n.name
                 FROM (SELECT *, unnest(layouts) AS layout FROM groups) g JOIN names n USING (layout))
           GROUP BY ALL)
SELECT name, list(gpu_config ORDER BY list_position($configs, gpu_config)), list(kernels::BIGINT ORDER BY list_position($configs, gpu_config))
FROM counts GROUP BY name"""


def _seqs(con: Con, run: RunSummary) -> tuple[int, int] | None:
    """The first and last seq of the run's current kernels, None if it has none."""
    first, last = one_row(con, _SEQS, [run.id])
    return None if first is None else (first, last)


def stat_catalogue(con: Con, run: RunSummary, q: str) -> StatCatalogue:
    """The names of the run's kernels' stats that hold `q` (in `natural` order), each with how
    many kernel indices of each config have it (configs in entry order); and the per-unit
    tables among them of more than one unit."""
    with snapshot(con):
        seqs = _seqs(con, run)
        records = []
        if seqs is not None:
            labels, order = _labels(con, run)
            layouts = con.sql(_LAYOUTS, params={"run": run.id, "first": seqs[0], "last": seqs[1], **labels}).to_arrow_table()
            firsts = layouts.group_by("layout").aggregate([("seq", "min")])  # one kernel of each set
            first_seqs = firsts.column("seq_min").to_pylist()
            held = {"seqs": first_seqs, "first": min(first_seqs, default=0), "last": max(first_seqs, default=0), "q": search_pattern(q)}
            names = con.sql(_NAMES_OF, params=held).to_arrow_table()
            layout_of = dict(zip(first_seqs, firsts.column("layout").to_pylist()))
            layout_names = pa.table({"layout": pa.array([layout_of[s] for s in names.column("seq").to_pylist()], pa.uint64()), "name": names.column("name")})
            with registered(con, "layouts", layouts), registered(con, "layout_names", layout_names):
                records = con.execute(_CATALOGUE, {"configs": order}).fetchall()
    records.sort(key=lambda r: natural(r[0]))
    tables: dict[str, int] = {}
    for name, _, _ in records:
        table = table_name(name)
        if table != name:
            tables[table] = tables.get(table, 0) + 1
    return StatCatalogue(
        names=[StatName(name=name, kernels=dict(zip(cfgs, counts))) for name, cfgs, counts in records[:CATALOGUE_LIMIT]],
        # A "table" of one unit (`Class 0`, the only traffic class) is its one name, listed already.
        tables=[StatTable(name=t, stats=n) for t, n in sorted(tables.items(), key=lambda item: natural(item[0])) if n > 1],
        truncated=len(records) > CATALOGUE_LIMIT,
    )


# The run's kernels of index $low to below $below: each with its config, sim, whether its
# printed totals are its own, and the `gpu_tot_*` snapshots of a split or reusing sim's
# kernel (in `_SNAPSHOTS`' order), which are the sim's, as the maps answer them, not its
# rows' (a chunk's own, a reused kernel's its source's). A stitched sim's printed totals are
# not the sim's (a chunk's began at its warm-up, a resume's too, a reusing sim's left out
# the launches reused): its running totals are its kernels' own values summed over its
# launches in order (`_stitched_totals`).
_SNAPSHOTS = [name for name in RECOMPUTED_TOTALS if stat_kinds.kind_of(name) == "snapshot"]
_PART_KERNELS = f"""SELECT * FROM ({_run_kernels(
    ", k.sim_id, (s.split IS NOT NULL OR s.reuse OR len(s.resumed) > 0) AS stitched, "
    f"[{', '.join(RECOMPUTED_TOTALS[name] for name in _SNAPSHOTS)}] AS snapshots"
)}) WHERE kernel_index >= $low AND kernel_index < $below"""  # after the snapshots' windows over the sim
_HAS_ONE = "(v.value IS NOT NULL OR v.text IS NOT NULL OR v.printed_total IS NOT NULL)"
# The rows of the stats $wanted (ids) of the kernels $seqs (between $first and $last): read
# apart from the kernels, by a semi join on seqs whose table is the part's kernels, and with
# no join on rows, order or aggregate in DuckDB, the memory a part takes is its rows'. A window and a join over the rows up to a part's last kernel took
# more than serve's 64 MiB at 40k kernels right after an ingest (bench/README.md, "Stat values
# in bounded memory").
_PART_ROWS = f"""SELECT v.seq, v.stat, v.value, v.printed_total, {_HAS_ONE} FROM kernel_stats v
WHERE v.seq BETWEEN $first AND $last AND v.seq IN (SELECT unnest($seqs::BIGINT[])) AND list_contains($wanted, v.stat)"""
# Which of $stats the run's kernels have: a semi join, whose table is of kernels, not rows.
_HELD = f"""
SELECT DISTINCT v.stat FROM kernel_stats v
WHERE v.seq BETWEEN $first AND $last AND list_contains($stats, v.stat) AND {_HAS_ONE} AND v.seq IN (SELECT seq FROM ({_RUN_KERNELS}))"""


class _PartKernel(msgspec.Struct, frozen=True):
    """A row of `_PART_KERNELS`."""

    seq: int
    kernel_index: int
    name: str
    gpu_config: str
    replica: int
    sim_id: str
    stitched: bool
    snapshots: list[float | None]


StatRow = tuple[int, int, float | None, float | None, bool]  # a row of `_PART_ROWS`
Record = tuple[int, str, str, int, int, float | None, float | None, float | None, float | None]  # a row of the answer


def _part_kernels(con: Con, params: Mapping[str, object]) -> dict[int, _PartKernel]:
    """The kernels of `_PART_KERNELS`, by seq."""
    result = con.execute(_PART_KERNELS, params)
    columns = [c[0] for c in result.description]
    kernels = (_PartKernel(**dict(zip(columns, row, strict=True))) for row in result.fetchall())
    return {k.seq: k for k in kernels}


class _Kinds(msgspec.Struct, frozen=True):
    """Of the stats asked for, the running totals, the ratios of two (with their numerator's
    and denominator's ids, for those whose parts have ids), and the snapshots' places in
    `_PART_KERNELS`' list, by id."""

    running: frozenset[int]
    ratios: frozenset[int]
    parts: dict[int, tuple[int, int]]
    snapshots: dict[int, int]


def _kinds(con: Con, found: list[tuple[int, str]]) -> _Kinds:
    kinds = {i: stat_kinds.kind_of(stat) for i, stat in found}
    ratios = {i: stat for i, stat in found if kinds[i] == "ratio_of_totals"}
    wanted = sorted({part for name in ratios.values() for part in stat_kinds.ratio_parts(name) or ()} | set(_SNAPSHOTS))
    ids = dict(con.execute("SELECT name, id FROM stat_names WHERE name IN (SELECT unnest(?::VARCHAR[]))", [wanted]).fetchall())
    parts = ratio_part_ids(ratios, ids)
    return _Kinds(
        running=frozenset(i for i, kind in kinds.items() if kind == "running_total"),
        ratios=frozenset(ratios),
        parts={r: (n, d) for r, n, d in zip(parts["ratios"], parts["numerators"], parts["denominators"], strict=True)},
        snapshots={ids[name]: place for place, name in enumerate(_SNAPSHOTS) if name in ids},
    )


def _plus(total: float | None, value: float | None) -> float | None:
    """SQL's sum: of the values that are not NULL, NULL if none is."""
    return total if value is None else value if total is None else total + value


Sums = dict[tuple[str, int], tuple[float | None, float | None]]  # by (sim, stat): a sum, and a ratio's denominator's


def _stitched_totals(kernels: Mapping[int, _PartKernel], rows: list[StatRow], kinds: _Kinds, sums: Sums) -> dict[tuple[int, int], float | None]:
    """The running totals of the stitched sims' kernels among `kernels`, by (seq, stat): a
    running total's own values summed over the sim's launches up to the kernel, a ratio's
    the ratio of its parts' sums (over the kernels that have both), as a sim run whole
    prints them. `sums` holds each (sim, stat)'s after the kernels before these, and is moved
    on past them."""
    values: dict[int, dict[int, float | None]] = {}
    for seq, stat, value, _, _ in rows:
        if kernels[seq].stitched:
            values.setdefault(seq, {})[stat] = value
    totals: dict[tuple[int, int], float | None] = {}
    for seq in sorted(values, key=lambda seq: kernels[seq].kernel_index):
        mine, sim = values[seq], kernels[seq].sim_id
        for stat in kinds.running & mine.keys():
            total = _plus(sums.get((sim, stat), (None, None))[0], mine[stat])
            sums[sim, stat] = (total, None)
            totals[seq, stat] = total
        for ratio, (numerator, denominator) in kinds.parts.items():
            if numerator in mine and denominator in mine:
                above, below = sums.get((sim, ratio), (None, None))
                above, below = _plus(above, mine[numerator]), _plus(below, mine[denominator])
                sums[sim, ratio] = (above, below)
                totals[seq, ratio] = None if above is None or not below else above / below
    return totals


def _finite(values: list[float | None]) -> list[float]:
    return [v for v in values if v is not None and math.isfinite(v)]


def _records(kernels: Mapping[int, _PartKernel], rows: list[StatRow], stats: frozenset[int], kinds: _Kinds, sums: Sums) -> list[Record]:
    """Per kernel index, config and stat of `stats` among `rows`, how many replicas have a
    value, the kernel's name as its first replica's, the median, least and greatest of their
    own finite values, and the median of their finite running totals: as printed, or
    stitched (`_stitched_totals`, `sums` moved on past these kernels)."""
    stitched = _stitched_totals(kernels, rows, kinds, sums)
    groups: dict[tuple[int, str, int], tuple[list[tuple[int, str]], list[float | None], list[float | None]]] = {}
    for seq, stat, value, printed, has_one in rows:
        if stat not in stats or not has_one:
            continue
        kernel = kernels[seq]
        names, values, running = groups.setdefault((kernel.kernel_index, kernel.gpu_config, stat), ([], [], []))
        names.append((kernel.replica, kernel.name))
        snapshot = kernel.snapshots[kinds.snapshots[stat]] if stat in kinds.snapshots else None
        values.append(value if snapshot is None else snapshot)
        if stat in kinds.running or stat in kinds.ratios:
            running.append(stitched.get((seq, stat)) if kernel.stitched else printed)
    records: list[Record] = []
    for (index, config, stat), (names, values, running) in groups.items():
        finite, totals = _finite(values), _finite(running)
        median, total = (statistics.median(finite) if finite else None), (statistics.median(totals) if totals else None)
        records.append((index, min(names)[1], config, stat, len(names), median, min(finite, default=None), max(finite, default=None), total))
    return records


def stat_values(con: Con, run: RunSummary, name: str) -> StatValues:
    """Per kernel index, config and unit, the stat's median over the config's replicas with
    its least and greatest value (finite numbers only), for every name `name` stands for
    that the run's kernels have."""
    pattern = re.compile(name_pattern(name))
    with snapshot(con):
        labels, order = _labels(con, run)
        if ANY_INDEX in name:
            found = con.execute("SELECT id, name FROM stat_names WHERE regexp_full_match(name, ?)", [pattern.pattern]).fetchall()
        else:
            found = con.execute("SELECT id, name FROM stat_names WHERE name = ?", [name]).fetchall()
        units = {stat: unit_numbers(pattern, stat) for _, stat in found}
        found.sort(key=lambda f: units[f[1]])
        ids = [i for i, _ in found]
        seqs = _seqs(con, run)
        records: list[Record] = []
        if ids and seqs is not None:
            kinds = _kinds(con, found)
            wanted = sorted({*ids, *(p for pair in kinds.parts.values() for p in pair)})
            config_at, stat_at = {config: i for i, config in enumerate(order)}, {stat: i for i, stat in enumerate(ids)}
            sums: Sums = {}
            # A part of the kernel indices at a time, in order until the answer is full, each
            # reading its own kernels' rows: a stitched sim's running totals go on from the
            # parts before in `sums`.
            step = max(1, GROUPS_AT_ONCE // max(1, len(order) * len(ids)))
            for low in range(0, one_row(con, _LAST_INDEX, [run.id])[0] + 1, step):
                kernels = _part_kernels(con, {"run": run.id, "low": low, "below": low + step, **labels})
                if not kernels:
                    continue
                of_part = {"first": min(kernels), "last": max(kernels), "seqs": list(kernels), "wanted": wanted}
                part = _records(kernels, con.execute(_PART_ROWS, of_part).fetchall(), frozenset(ids), kinds, sums)
                records += sorted(part, key=lambda r: (r[0], config_at[r[2]], stat_at[r[3]]))
                if len(records) > VALUES_LIMIT:
                    break
        truncated = len(records) > VALUES_LIMIT
        # The stats the rows show, unless some were cut off: then the ones the run has.
        held = {r[3] for r in records}
        if truncated and seqs is not None:
            params = {"run": run.id, "first": seqs[0], "last": seqs[1], "stats": ids, **labels}
            held = {i for (i,) in con.execute(_HELD, params).fetchall()}
    names = dict(found)
    rows = [
        StatValuesRow(
            kernel_index=index,
            kernel_name=kernel,
            kernel_short_name=short_name(kernel),
            gpu_config=config,
            units=units[names[stat]],
            replicas=replicas,
            median=median,
            min=low,
            max=high,
            running_total=running_total,
        )
        for index, kernel, config, stat, replicas, median, low, high, running_total in records[:VALUES_LIMIT]
    ]
    return StatValues(
        name=name,
        configs=order,
        stats=[names[i] for i in ids if i in held],
        rows=rows,
        truncated=truncated,
    )


# Each current kernel's own values (`value`, finite numbers only) of the stats the derived
# metrics read ($ids), summed per part ($parts: a name with [*] is one part over its units).
_DERIVED_PARTS = f"""
WITH run_kernels AS ({_RUN_KERNELS})
SELECT r.kernel_index, r.name, r.gpu_config, r.replica, p.part, sum(v.value)
FROM kernel_stats v JOIN run_kernels r USING (seq)
JOIN (SELECT unnest($ids::INTEGER[]) AS stat, unnest($parts::VARCHAR[]) AS part) p ON p.stat = v.stat
WHERE v.seq BETWEEN $first AND $last AND isfinite(v.value)
GROUP BY ALL"""


def _part_ids(con: Con) -> tuple[list[int], list[str]]:
    """The ids of the names `derived_metrics.STATS` stands for, with the part each is read as."""
    ids: list[int] = []
    parts: list[str] = []
    for part, name in derived_metrics.STATS.items():
        found = con.execute("SELECT id FROM stat_names WHERE regexp_full_match(name, ?)", [name_pattern(name)]).fetchall()
        ids += [i for (i,) in found]
        parts += [part] * len(found)
    return ids, parts


def _median(values: list[float | None]) -> float | None:
    known = [v for v in values if v is not None]
    return statistics.median(known) if known else None


class GivenOptions(msgspec.Struct, frozen=True):
    """A config's options, by name (with its `-`), and where they were read."""

    values: dict[str, str]
    read_from: OptionsFrom


Options = GivenOptions | str  # or why they could not be read


def derived(con: Con, run: RunSummary, options: Mapping[str, Options]) -> DerivedMetrics:
    """The run's derived metrics (`derived_metrics.METRICS`) per kernel index and config, the
    median over the config's replicas, and per config over all its kernels. `options` are
    each config's, by its label (`runs.labels_of`)."""
    with snapshot(con):
        labels, order = _labels(con, run)
        seqs = _seqs(con, run)
        records = []
        if seqs is not None:
            ids, parts = _part_ids(con)
            params = {"run": run.id, "first": seqs[0], "last": seqs[1], "ids": ids, "parts": parts, **labels}
            records = con.execute(_DERIVED_PARTS, params).fetchall()
    sims: dict[tuple[str, int], dict[int, dict[str, float]]] = {}  # (config, replica) -> kernel index -> parts
    kernel_names: dict[int, str] = {}
    for index, kernel, config, replica, part, value in records:
        sims.setdefault((config, replica), {}).setdefault(index, {})[part] = value
        kernel_names.setdefault(index, kernel)
    given = {config: options.get(config, f"GPU config {config}: its options were not read") for config, _ in sims}
    facts = {config: derived_metrics.config_facts({} if isinstance(read, str) else read.values) for config, read in given.items()}
    kernels = []
    for index in sorted(kernel_names):
        for config in order:
            mine = [s[index] for (c, _), s in sims.items() if c == config and index in s]
            if not mine:
                continue
            each = [derived_metrics.kernel_metrics(p, facts[config]) for p in mine]
            kernels.append(
                DerivedKernel(
                    kernel_index=index,
                    kernel_name=kernel_names[index],
                    kernel_short_name=short_name(kernel_names[index]),
                    gpu_config=config,
                    replicas=len(mine),
                    values={m.name: _median([e[m.name] for e in each]) for m, _ in derived_metrics.METRICS},
                )
            )
    configs = []
    for config in order:
        replicas = [s for (c, _), s in sims.items() if c == config]
        if not replicas:
            continue
        read, fact = given[config], facts[config]
        each = [derived_metrics.over_kernels(list(s.values()), fact) for s in replicas]
        configs.append(
            DerivedConfig(
                gpu_config=config,
                options={} if isinstance(read, str) else {o: read.values[o] for o in derived_metrics.OPTIONS if o in read.values},
                options_from=None if isinstance(read, str) else read.read_from,
                dram_peak_gbps=None if fact.peak_bytes_per_s is None else fact.peak_bytes_per_s / 1e9,
                sms=None if fact.sms is None else int(fact.sms),
                error=read if isinstance(read, str) else None,
                replicas=len(replicas),
                kernels=len({i for s in replicas for i in s}),
                values={m.name: _median([e[m.name] for e in each]) for m, _ in derived_metrics.METRICS},
            )
        )
    return DerivedMetrics(
        metrics=[m for m, _ in derived_metrics.METRICS],
        configs=configs,
        kernels=kernels[:VALUES_LIMIT],
        truncated=len(kernels) > VALUES_LIMIT,
    )
