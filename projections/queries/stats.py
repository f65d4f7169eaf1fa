"""Reads of a run's kernel stats by name: the names its kernels have (a catalogue), and one
stat's values per kernel and config, as the API's Structs.

Names are docs/stats-naming.md's. In the name asked for, `[*]` stands for any index, so
`L2_cache_bank[*].Miss_rate` is the table of every L2 bank's miss rate and
`maximum service time to same row.dram[*][*]` the one of every DRAM channel and bank.

Each answer is one query over the kernels table's JSON `stats` text (`json_keys`,
`json_extract_string`), so DuckDB parses every kernel's map once per answer (twice for a
name with `[*]`: once to find the names it matches, once to read them). Tens of kernels take
milliseconds; 10,000 of 300 KB each (3 GB of JSON), on 2 busy cores, 20 s for one stat and
about a minute for a search of the catalogue. Only the current attempt of a sim counts.
"""

from __future__ import annotations

import re

from cascade_core.models import RunSummary, StatCatalogue, StatName, StatTable, StatValues, StatValuesRow
from projections.queries.runs import CURRENT_KERNELS, Con, configs, snapshot

CATALOGUE_LIMIT = 200  # names in a catalogue's answer
VALUES_LIMIT = 50_000  # rows in a values answer
MAX_NAME = 500  # characters of a name or search

ANY_INDEX = "[*]"
_INDEX = re.compile(r"\[([0-9]+)\]")
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


# Each name of each current kernel of run `?`: unnest in the select list, as a lateral join of
# unnest(json_keys(...)) takes DuckDB seconds per kernel.
_STAT_NAMES = f"SELECT s.gpu_config, k.kernel_index, unnest(json_keys(k.stats)) AS stat FROM {CURRENT_KERNELS} WHERE s.run_id = ?"


def search_pattern(q: str) -> str:
    """The names a search `q` finds: those holding it, ignoring case, `[*]` any index."""
    return _regex(_checked(q, "q"), r"\[[0-9]+\]")


def name_pattern(name: str) -> str:
    """The names `name` stands for, each `[*]` a group capturing its index."""
    if not name:
        raise BadName("name is required: a stat's name, with [*] for any index")
    return _regex(_checked(name, "name"), r"\[([0-9]+)\]")


def natural(name: str) -> list[str | int]:
    """The order of names: by their text, indices as numbers (`[2]` before `[10]`)."""
    parts: list[str | int] = []
    for i, part in enumerate(_INDEX.split(name)):
        parts.append(int(part) if i % 2 else part)
    return parts


def table_name(name: str) -> str:
    """The per-unit table a name belongs to: each of its indices as `[*]`."""
    return _INDEX.sub(ANY_INDEX, name)


def stat_catalogue(con: Con, run: RunSummary, q: str) -> StatCatalogue:
    """The names of the run's kernels' stats that hold `q` (in `natural` order), each with how
    many kernel indices of each config have it (configs in entry order); and the per-unit
    tables among them."""
    order = configs(run)
    records = con.execute(
        f"""SELECT stat, list(gpu_config ORDER BY list_position(?, gpu_config)), list(kernels ORDER BY list_position(?, gpu_config))
            FROM (SELECT stat, gpu_config, count(DISTINCT kernel_index) AS kernels
                  FROM ({_STAT_NAMES}) WHERE regexp_matches(stat, ?, 'i')
                  GROUP BY ALL)
            GROUP BY stat""",
        [order, order, run.id, search_pattern(q)],
    ).fetchall()
    records.sort(key=lambda r: natural(r[0]))
    tables: dict[str, int] = {}
    for name, _, _ in records:
        table = table_name(name)
        if table != name:
            tables[table] = tables.get(table, 0) + 1
    return StatCatalogue(
        names=[StatName(name=name, kernels=dict(zip(cfgs, counts))) for name, cfgs, counts in records[:CATALOGUE_LIMIT]],
        tables=[StatTable(name=t, stats=n) for t, n in sorted(tables.items(), key=lambda item: natural(item[0]))],
        truncated=len(records) > CATALOGUE_LIMIT,
    )


def _pointer(name: str) -> str:
    """A JSON pointer (RFC 6901) to a top-level key: names hold `/` (`inst/sec`), never a
    pointer's own escapes."""
    return "/" + name.replace("~", "~0").replace("/", "~1")


def _units(pattern: re.Pattern[str], stat: str) -> list[int]:
    match = pattern.fullmatch(stat)
    assert match is not None, stat  # DuckDB found it by the same expression
    return [int(i) for i in match.groups()]


def stat_values(con: Con, run: RunSummary, name: str) -> StatValues:
    """Per kernel index, config and unit, the stat's median over the config's replicas with
    its least and greatest value (finite numbers only), for every name `name` stands for."""
    pattern = re.compile(name_pattern(name))
    order = configs(run)
    with snapshot(con):
        if ANY_INDEX in name:
            found = con.execute(
                f"SELECT DISTINCT stat FROM ({_STAT_NAMES}) WHERE regexp_full_match(stat, ?)",
                [run.id, pattern.pattern],
            ).fetchall()
            units = {stat: _units(pattern, stat) for stat, in found}
        else:
            units = {name: []}
        stats = sorted(units, key=units.__getitem__)
        finite = "FILTER (WHERE isfinite(v))"
        records = con.execute(
            f"""SELECT kernel_index, arg_min(name, replica), gpu_config, stat, count(*), median(v) {finite}, min(v) {finite}, max(v) {finite}
                FROM (SELECT *, TRY_CAST(raw AS DOUBLE) AS v
                      FROM (SELECT k.kernel_index, k.name, s.gpu_config, s.replica,
                                   unnest(?::VARCHAR[]) AS stat, unnest(json_extract_string(k.stats, ?::VARCHAR[])) AS raw
                            FROM {CURRENT_KERNELS} WHERE s.run_id = ?))
                WHERE raw IS NOT NULL
                GROUP BY kernel_index, gpu_config, stat
                ORDER BY kernel_index, list_position(?, gpu_config), list_position(?, stat)
                LIMIT ?""",
            [stats, [_pointer(s) for s in stats], run.id, order, stats, VALUES_LIMIT + 1],
        ).fetchall()
    rows = [
        StatValuesRow(kernel_index=index, kernel_name=kernel, gpu_config=config, units=units[stat], replicas=replicas, median=median, min=low, max=high)
        for index, kernel, config, stat, replicas, median, low, high in records[:VALUES_LIMIT]
    ]
    return StatValues(
        name=name,
        configs=order,
        stats=stats if ANY_INDEX in name or rows else [],
        rows=rows,
        truncated=len(records) > VALUES_LIMIT,
    )
