"""`cascade sweep` and `cascade campaign list|show`: campaigns from a terminal, through the
public API only. `campaign show` prints what Accel-Sim's job_status.py and get_stats.py do:
every sim's state, progress and rate, then a stat's table, trace by config."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from urllib.parse import urlencode

import msgspec

from cascade_api.campaigns import CampaignDetail, CampaignSummary, CampaignTable
from cascade_cli import locate
from cascade_cli.locate import api_client
from cascade_cli.runs_cli import _answer, _print, print_json, quoted_id
from cascade_cli.runs_text import NONE, compact, counts, integer, local_time, rate, table
from cascade_core.campaigns import CampaignCreate
from cascade_formats import gpgpusim_options

DEFAULT_STAT = "gpu_tot_sim_cycle"


def _api(parser: argparse.ArgumentParser, shows: str) -> argparse.ArgumentParser:
    parser.add_argument("--json", action="store_true", help=f"print {shows} as the API answers it")
    locate.add_arguments(parser)
    return parser


def add_arguments(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """`sweep` and `campaign` on the `cascade` command's parser."""
    sweep = sub.add_parser("sweep", help="create a campaign: each trace run on each config (and grid variant), REPLICAS times")
    sweep.add_argument("--name", required=True, help="the campaign's name (letters, digits, . _ -), unique")
    sweep.add_argument("--trace", action="append", required=True, metavar="TRACE", help="a ready trace's id (repeat for more)")
    sweep.add_argument("--config", action="append", default=[], metavar="CONFIG", help="a GPU config (repeat for more)")
    sweep.add_argument("--base", metavar="CONFIG", help="with --grid: the config the grid's variants are derived from")
    sweep.add_argument(
        "--grid", action="append", type=grid_arg, default=[], metavar="OPTION=V1,V2",
        help="a simulator option and its values (V1|V2 when values hold commas; the option's leading - may be left out, "
        "as argparse takes -x for a flag): one variant of --base per point of the options' product (repeat for more)",
    )
    sweep.add_argument("--replicas", type=int, default=1, help="sims of each trace on each config (default 1)")
    sweep.add_argument("--tag", action="append", default=[], metavar="TAG", help="a tag for the campaign and its runs (repeat for more)")
    sweep.add_argument("--baseline", metavar="CONFIG", help="the config its tables are normalised to")
    _api(sweep, "the CampaignDetail")

    campaign = sub.add_parser("campaign", help="list campaigns, or show one: its sims and a stat's table")
    campaign_sub = campaign.add_subparsers(dest="campaign_command", required=True)
    _api(campaign_sub.add_parser("list", help="every campaign, newest first"), "the list")
    show = campaign_sub.add_parser("show", help="a campaign's sims, and a stat per trace and config")
    show.add_argument("campaign", metavar="CAMPAIGN", help="a campaign's name or id")
    show.add_argument("--stat", default=DEFAULT_STAT, help=f"a stat's name (default {DEFAULT_STAT}; gpu_tot_ipc, any stat)")
    show.add_argument("--baseline", metavar="CONFIG", help="normalise to this config (default: the campaign's baseline)")
    _api(show, "the CampaignDetail, then the CampaignTable,")


def grid_arg(value: str) -> tuple[str, list[str]]:
    """`--grid`: `OPTION=V1,V2`, or `OPTION=V1|V2` for an option whose values may hold commas
    (an L2's geometry, a list), which a comma never splits: one such value is one point."""
    option, equals, values = value.partition("=")
    if not equals or not option.strip("-") or not values:
        raise argparse.ArgumentTypeError(f"expected OPTION=V1,V2 (or OPTION=V1|V2 when values hold commas), not {value!r}")
    option = "-" + option.lstrip("-")
    return option, values.split("|" if "|" in values or gpgpusim_options.holds_commas(option) else ",")


def sweep(args: argparse.Namespace) -> int:
    body = CampaignCreate(
        name=args.name, traces=args.trace, configs=args.config, tags=args.tag, replicas=args.replicas, baseline=args.baseline,
        base=args.base, grid=dict(args.grid) or None,
    )
    raw = api_client(args).post("/api/campaigns", msgspec.json.encode(body), {"Content-Type": "application/json"})
    return _answer(args, raw, CampaignDetail, lambda c: [f"campaign {c.name} ({c.id}): {len(c.runs)} runs, {len(c.sims)} sims"])


def campaign(args: argparse.Namespace) -> int:
    client = api_client(args)
    if args.campaign_command == "list":
        return _answer(args, client.get("/api/campaigns"), list[CampaignSummary], campaigns_table)
    key = quoted_id(args.campaign)
    raw = client.get(f"/api/campaigns/{key}")
    query = urlencode({"stat": args.stat, **({"baseline": args.baseline} if args.baseline else {})})
    stat = client.get(f"/api/campaigns/{key}/table?{query}")
    if args.json:
        print_json(raw)
        print_json(stat)
        return 0
    _print([*campaign_text(msgspec.json.decode(raw, type=CampaignDetail)), "", *stat_table(msgspec.json.decode(stat, type=CampaignTable))])
    return 0


def campaigns_table(campaigns: Sequence[CampaignSummary]) -> list[str]:
    if not campaigns:
        return ["no campaigns"]
    rows = [
        [c.name, c.state, str(len(c.traces)), str(len(c.configs)), str(c.replicas), counts(c.sim_counts), " ".join(c.tags), local_time(c.created_at)]
        for c in campaigns
    ]
    return table(["campaign", "state", "traces", "configs", "replicas", "sims", "tags", "created"], rows)


def campaign_text(c: CampaignDetail) -> list[str]:
    """The campaign, and its sims as job_status.py lists jobs."""
    lines = [
        f"campaign  {c.name}  ({c.id})  {c.state}  ({counts(c.sim_counts)})",
        f"traces    {', '.join(c.traces)}",
        f"configs   {', '.join(c.configs)}  x{c.replicas}" + (f"  baseline {c.baseline}" if c.baseline else ""),
        *([f"tags      {' '.join(c.tags)}"] if c.tags else []),
        "",
    ]
    rows = [
        [s.trace_id, s.gpu_config, str(s.replica), s.run_id, s.sim_id, s.state + (" (cut short)" if s.cut_short else "") + (" (cached)" if s.cached_from else ""),
         f"{s.kernels_done}/{s.kernels_total}", integer(s.gpu_tot_sim_cycle), rate(s.sim_rate_ips)]
        for s in c.sims
    ]
    return lines + table(["trace", "config", "replica", "run", "sim", "state", "kernels", "cycles", "rate"], rows, frozenset({2, 6, 7, 8}))


def stat_table(t: CampaignTable) -> list[str]:
    """A stat per trace (rows) and config (columns), as get_stats.py writes it; with a
    baseline, each value's ratio to it in parentheses."""
    configs = list(dict.fromkeys(row.config for row in t.rows))
    traces = list(dict.fromkeys(row.trace_id for row in t.rows))
    cells = {(row.trace_id, row.config): row for row in t.rows}

    def cell(trace: str, config: str) -> str:
        row = cells[trace, config]
        if row.value is None:
            return NONE
        return compact(row.value) + (f" ({row.normalised:.3f})" if row.normalised is not None else "")

    said = f"{t.stat}, mean of succeeded sims" + (f", normalised to {t.baseline}" if t.baseline else "")
    return [said, *table(["trace", *configs], [[trace, *(cell(trace, c) for c in configs)] for trace in traces], frozenset(range(1, len(configs) + 1)))]
