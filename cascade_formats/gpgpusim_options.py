"""GPGPU-Sim's options: the set a simulator build knows, learnt from the option dump at the top
of its log, what type each one's value is, how a value is checked against it, and how a
`gpgpusim.config` reads and is rewritten with other values.

The simulator prints every option it knows with its value and help before it runs:

    GPGPU-Sim: Configuration options:

    -gpgpu_n_clusters                      28 # number of processing clusters
    -gpgpu_cache:dl2     S:64:128:16,L:B:m:L:P,A:256:64,16:0,32 # unified banked L2 data cache config ...

`gpgpusim_options.json` beside this module holds that set per build (the `Accel-Sim [build
...]` string at the top of the same log): `python -m cascade_formats.gpgpusim_options LOG...`
adds the builds of the logs given. An option's type is told from its value and help, as
the dump gives no types: a cache config string, a flag (0 or 1, its help saying on or off),
an integer, a number, a list of numbers, or text.
"""

from __future__ import annotations

import json
import re
import shlex
import sys
from collections.abc import Iterable, Mapping
from functools import cache
from pathlib import Path
from typing import Literal

import msgspec

CATALOGUE = Path(__file__).with_name("gpgpusim_options.json")
DUMP_HEADING = "GPGPU-Sim: Configuration options:"
_BUILD = re.compile(r"Accel-Sim \[build (\S+)\]")
_INT = re.compile(r"-?[0-9]+")
_FLOAT = re.compile(r"-?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][-+]?[0-9]+)?")
_FLAG_HELP = re.compile(r"\b(on|off|enable[sd]?|disable[sd]?|turn|whether)\b", re.IGNORECASE)
_CACHE = re.compile(r"[NS]:[0-9]+:")
_NUMBERS = re.compile(r"-?[0-9.]+([,:]-?[0-9.]+)+")

Kind = Literal["cache", "flag", "int", "float", "int_list", "float_list", "text"]


class OptionSpec(msgspec.Struct, frozen=True, kw_only=True):
    kind: Kind
    default: str  # the value the build's dump showed (the config's, or the build's default)
    help: str


class InvalidOption(ValueError):
    """An option a simulator build would refuse or abort on; the message names it and says why."""


def kind_of(value: str, help_text: str) -> Kind:
    """The type of an option, told from a value of it and its help."""
    if _CACHE.match(value) or "<nsets>:<bsize>:<assoc>" in help_text:
        return "cache"
    if value in ("0", "1") and _FLAG_HELP.search(help_text):
        return "flag"
    if _INT.fullmatch(value):
        return "int"
    if _FLOAT.fullmatch(value):
        return "float"
    if _NUMBERS.fullmatch(value):
        return "float_list" if "." in value else "int_list"
    return "text"


def learn(lines: Iterable[str]) -> tuple[str | None, dict[str, OptionSpec]]:
    """The build a log names and the options its dump shows, by name (with its `-`), from the
    log's lines (read no further than the dump's end: a log runs to hundreds of MB)."""
    build = None
    options: dict[str, OptionSpec] = {}
    in_dump = False
    for raw in lines:
        line = raw.rstrip("\n")
        if build is None and (match := _BUILD.search(line)):
            build = match.group(1)
        if line == DUMP_HEADING:
            in_dump = True
            continue
        if not in_dump:
            continue
        if not line.startswith("-"):
            if options:
                break
            continue
        name, _, rest = line.partition(" ")
        value, _, help_text = rest.partition(" # ")
        value = value.strip()
        options[name] = OptionSpec(kind=kind_of(value, help_text), default=value, help=help_text.strip())
    return build, options


Catalogue = dict[str, dict[str, OptionSpec]]  # by build, by option name


@cache
def catalogue() -> Catalogue:
    """Every build's options, as `gpgpusim_options.json` holds them."""
    return msgspec.json.decode(CATALOGUE.read_bytes(), type=Catalogue)


LISTS: frozenset[Kind] = frozenset({"cache", "int_list", "float_list", "text"})  # kinds whose values may hold commas


def holds_commas(option: str) -> bool:
    """Whether a value of `option` may hold commas (a cache config, a list), in any build."""
    return any(option in specs and specs[option].kind in LISTS for specs in catalogue().values())


def check(options: Mapping[str, str], builds: Catalogue | None = None) -> None:
    """Raise `InvalidOption` for the first option (by name) that some catalogued build does
    not know, or whose value is not of its type or breaks a rule GPGPU-Sim aborts on."""
    known = catalogue() if builds is None else builds
    for name in sorted(options):
        value = options[name]
        if not name.startswith("-"):
            raise InvalidOption(f"option {name}: an option's name starts with '-' (as in -{name})")
        for build, specs in sorted(known.items()):
            spec = specs.get(name)
            if spec is None:
                raise InvalidOption(f"option {name}: GPGPU-Sim does not know it (build {build} has no such option)")
            _check_value(name, value, spec)


def _check_value(name: str, value: str, spec: OptionSpec) -> None:
    if not value.strip() or "\n" in value or '"' in value:
        raise InvalidOption(f"option {name}: {value!r} is no value (empty, or holding a newline or a double quote)")
    match spec.kind:
        case "cache":
            check_cache(name, value)
        case "flag":
            if value not in ("0", "1"):
                raise InvalidOption(f"option {name}: {value!r} is not 0 or 1 (it turns something on or off)")
        case "int":
            if not _INT.fullmatch(value):
                raise InvalidOption(f"option {name}: {value!r} is not an integer")
        case "float":
            if not _FLOAT.fullmatch(value):
                raise InvalidOption(f"option {name}: {value!r} is not a number")
        case "int_list" | "float_list":
            separator = ":" if ":" in spec.default else ","
            element = _INT if spec.kind == "int_list" else _FLOAT
            if not all(element.fullmatch(part) for part in value.split(separator)):
                what = "integers" if spec.kind == "int_list" else "numbers"
                raise InvalidOption(f"option {name}: {value!r} is not a list of {what} separated by {separator!r} (as {spec.default})")
        case "text":
            pass


# GPGPU-Sim's cache config: `<type>:<nsets>:<bsize>:<assoc>,<rep>:<wr>:<alloc>:<wr_alloc>:<set
# index function>,<mshr>:<N>:<merge>,<mq>[:<rf>][,<port width>]` (cache_config::init, gpu-cache.h).
_CACHE_CONFIG = re.compile(
    r"(?P<type>[NS]):(?P<sets>[0-9]+):(?P<line>[0-9]+):(?P<assoc>[0-9]+),"
    r"(?P<rep>[LF]):(?P<write>[RBTEL]):(?P<alloc>[mfs]):(?P<write_alloc>[NWFL])(:(?P<index>[HPCLX]))?,"
    r"(?P<mshr>[FTAS]):[0-9]+:[0-9]+,[0-9]+(:[0-9]+)?(,[0-9]+)?"
)
SECTOR_LINE = 128  # GPGPU-Sim's SECTOR_SIZE (32) x SECTOR_CHUNCK_SIZE (4): a sector cache's only line size
IPOLY_SETS = (16, 32, 64)  # the set counts ipoly_hash_function has equations for (hashing.cc)


def check_cache(name: str, value: str) -> None:
    """A cache config string as GPGPU-Sim reads it, or `none` (no such cache); refused where
    it would exit at parsing or abort when the cache is built or first indexed."""
    if value == "none":
        return
    match = _CACHE_CONFIG.fullmatch(value)
    if match is None:
        raise InvalidOption(
            f"option {name}: {value!r} is not a cache config "
            "(<N|S>:<nsets>:<bsize>:<assoc>,<rep>:<wr>:<alloc>:<wr_alloc>:<set index>,<mshr>:<N>:<merge>,<mq>...)"
        )
    sets, line = int(match["sets"]), int(match["line"])
    if match["type"] == "S" and line != SECTOR_LINE:
        raise InvalidOption(f"option {name}: a sector cache (S) has {SECTOR_LINE}-byte lines in GPGPU-Sim, not {line}")
    if match["index"] == "P" and sets not in IPOLY_SETS:
        raise InvalidOption(
            f"option {name}: {sets} sets with the IPOLY set-index hash (P): GPGPU-Sim's IPOLY hash takes only 16, 32 "
            "or 64 sets and aborts on others; use 16, 32 or 64 sets, or the linear index (L)"
        )
    if match["alloc"] in "fs" and match["write"] == "B":
        raise InvalidOption(f"option {name}: a write-back cache (B) cannot allocate on fill ({match['alloc']}): GPGPU-Sim aborts on it")


# --- config files -----------------------------------------------------------------------


def read_config(text: str) -> dict[str, str]:
    """The options a config file sets, by name (with its `-`), the last of a name winning as
    in GPGPU-Sim's parser: `#` starts a comment, and a double-quoted value may span lines
    (its whitespace read as one space, as the option dump shows it)."""
    tokens = shlex.split(text, comments=True)
    return {flag: " ".join(value.split()) for flag, value in zip(tokens[0::2], tokens[1::2])}


def with_options(text: str, options: Mapping[str, str]) -> str:
    """The config file `text` with `options` set: an option set on a line of its own has that
    line's value replaced, any other is appended at the end (GPGPU-Sim takes a name's last
    value, so an appended one wins over a value spanning lines)."""
    lines = text.splitlines()
    left = dict(options)
    for i, line in enumerate(lines):
        tokens = line.split("#", 1)[0].split()
        if len(tokens) == 2 and tokens[0] in left and '"' not in line:
            lines[i] = f"{tokens[0]} {_quoted(left.pop(tokens[0]))}"
    if left:
        lines += ["", "# set by Cascade's config variant"] + [f"{name} {_quoted(value)}" for name, value in sorted(left.items())]
    return "\n".join(lines) + "\n"


def _quoted(value: str) -> str:
    return f'"{value}"' if any(c.isspace() for c in value) else value


def _write(logs: list[str]) -> None:
    """Add the builds of `logs` to the catalogue file."""
    known = catalogue() if CATALOGUE.exists() else {}
    for log in logs:
        with open(log, errors="replace") as lines:
            build, options = learn(lines)
        if build is None or not options:
            raise SystemExit(f"{log}: no Accel-Sim build line or no option dump")
        known[build] = {name: spec for name, spec in options.items() if name != "-trace"}  # a sim's own input, not the config's
    CATALOGUE.write_text(json.dumps(msgspec.to_builtins(known), indent=1, sort_keys=True) + "\n")


if __name__ == "__main__":
    _write(sys.argv[1:])
