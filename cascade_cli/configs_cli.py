"""`cascade configs` and `cascade config derive|show|diff`: the GPU configs a run may name, and
config variants, from a terminal, through the public API.

    cascade configs
    cascade config derive SM61_TITANX_L2x2 --base SM61_TITANX --option -gpgpu_cache:dl2=S:64:128:32,L:B:m:L:P,A:192:4,32:0,32
    cascade config show SM61_TITANX_L2x2
    cascade config diff SM61_TITANX SM61_TITANX_L2x2
"""

from __future__ import annotations

import argparse

import msgspec

from cascade_app.config import ConfigError
from cascade_cli.locate import api_client
from cascade_cli.runs_cli import _answer, quoted_id
from cascade_cli import runs_text
from cascade_core.gpu_configs import GpuConfig, OfferedConfig
from cascade_core.variants import ConfigDerive, OptionDifference


def parse_option(token: str) -> tuple[str, str]:
    """`-name=value` (the name holds no '=', a value may): the option and its value."""
    name, equals, value = token.partition("=")
    if not equals or not name.startswith("-"):
        raise ConfigError(f"--option {token}: expected -NAME=VALUE, such as -gpgpu_n_clusters=14")
    return name, value


def joined_options(argv: list[str]) -> list[str]:
    """`--option -NAME=VALUE` as `--option=-NAME=VALUE`: argparse would read a value that
    starts with '-' as another flag."""
    joined: list[str] = []
    for token in argv:
        if joined and joined[-1] == "--option" and token.startswith("-"):
            joined[-1] = f"--option={token}"
        else:
            joined.append(token)
    return joined


def add_arguments(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> list[argparse.ArgumentParser]:
    """The `config` command's subcommands, for the caller to give where the API is."""
    config = sub.add_parser("config", help="GPU config variants: derive one, show a config, diff two")
    config_sub = config.add_subparsers(dest="config_command", required=True)
    derive = config_sub.add_parser("derive", help="a new config: a base with GPGPU-Sim options set, checked before anything runs")
    derive.add_argument("name", metavar="NAME", help="the new config's name")
    derive.add_argument("--base", required=True, help="the config it derives from")
    derive.add_argument(
        "--option", action="append", required=True, metavar="-NAME=VALUE",
        help="an option to set, such as --option -gpgpu_n_clusters=14 (one --option per option)",
    )
    show = config_sub.add_parser("show", help="a config: arch, core clock, digest, and a variant's base and options")
    show.add_argument("name", metavar="NAME")
    diff = config_sub.add_parser("diff", help="the options two configs set differently")
    diff.add_argument("a", metavar="A")
    diff.add_argument("b", metavar="B")
    for command, shows in ((derive, "the GpuConfig"), (show, "the GpuConfig"), (diff, "the differences")):
        command.add_argument("--json", action="store_true", help=f"print {shows} as the API answers it")
    return [derive, show, diff]


def config(args: argparse.Namespace) -> int:
    client = api_client(args)
    if args.config_command == "derive":
        body = ConfigDerive(name=args.name, base=args.base, options=dict(map(parse_option, args.option)))
        return _answer(args, client.post("/api/gpu-configs", msgspec.json.encode(body)), GpuConfig, config_text)
    if args.config_command == "show":
        return _answer(args, client.get(f"/api/gpu-configs/{quoted_id(args.name)}"), GpuConfig, config_text)
    path = f"/api/gpu-configs/{quoted_id(args.a)}/diff/{quoted_id(args.b)}"
    return _answer(args, client.get(path), list[OptionDifference], lambda found: diff_text(args.a, args.b, found))


def list_configs(args: argparse.Namespace) -> int:
    return _answer(args, api_client(args).get("/api/gpu-configs"), list[OfferedConfig], configs_table)


def configs_table(configs: list[OfferedConfig]) -> list[str]:
    """Each config a run may name: arch, core clock, the first 12 hex of its digest (two
    configs of one name with other files are two rows), the base of a variant, and where it
    runs: this server's install and the live runners that have it."""
    if not configs:
        return ["no configs: this server has no Accel-Sim install and no runner is live"]
    rows = [
        [c.name, c.arch, f"{c.core_clock_mhz:g}", (c.digest or runs_text.NONE)[:12], c.base or runs_text.NONE,
         ", ".join((["this server"] if c.local else []) + c.runners) or runs_text.NONE]
        for c in configs
    ]
    return runs_text.table(["config", "arch", "clock MHz", "digest", "base", "runs on"], rows, right=frozenset({2}))


def config_text(config: GpuConfig) -> list[str]:
    lines = [f"{config.name}: {config.arch}, core clock {config.core_clock_mhz:g} MHz, digest {config.digest or '-'}"]
    if config.base is not None:
        lines.append(f"  derived from {config.base} with:")
        lines += [f"    {name} {value}" for name, value in sorted((config.options or {}).items())]
    return lines


def diff_text(a: str, b: str, differences: list[OptionDifference]) -> list[str]:
    if not differences:
        return [f"{a} and {b} set the same options"]
    width = max(len(d.option) for d in differences)
    return [f"{'option':<{width}}  {a} | {b}"] + [f"{d.option:<{width}}  {d.a or '(not set)'} | {d.b or '(not set)'}" for d in differences]
