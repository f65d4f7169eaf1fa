"""Config variants: a base config plus option values, and how any two configs differ.

A variant's files are its base's, with the options set in its `gpgpusim.config`
(`cascade_formats.gpgpusim_options.with_options`, which also checks the options); it is
decided from those files, which the caller makes, into a `GpuConfigDerived` event. A run entry's own options make an unnamed
variant of its config, named after the config and the options' digest, so the same options
on the same config are one variant however often they are asked for. What a config sets is
its `gpgpusim.config`'s options; two configs differ option by option (`differences`).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping
from datetime import datetime
from typing import Annotated

import msgspec

from cascade_core import events as ev
from cascade_core.gpu_configs import GpuConfig, arch_from_config_name, config_digest, core_clock_from_config
from cascade_core.refusals import Conflict, Invalid, NotFound

CONFIG_FILE = "gpgpusim.config"
VariantName = Annotated[
    str, msgspec.Meta(min_length=1, max_length=128, description="The new config's name: letters, digits and _ . + - (as a folder's).")
]
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.+-]*")
Options = Annotated[
    dict[str, str],
    msgspec.Meta(
        description="GPGPU-Sim options by name (with their '-'), each value as the config file would give it; "
        "checked against the options the simulator knows, their types and the rules it aborts on."
    ),
]


class ConfigDerive(msgspec.Struct, frozen=True, kw_only=True):
    """`POST /api/gpu-configs`: a new config, `base` with `options` set."""

    name: VariantName
    base: Annotated[str, msgspec.Meta(description="The config it is derived from (a GpuConfig.name).")]
    options: Options


class OptionDifference(msgspec.Struct, frozen=True):
    """An option two configs set differently: its value in each (null: not set there)."""

    option: str
    a: str | None
    b: str | None


class DeriveConfig(msgspec.Struct, frozen=True, kw_only=True):
    event_id: str
    at: datetime
    body: ConfigDerive
    unnamed: bool = False


class BadOption(Invalid):
    """An option GPGPU-Sim does not know, a value not of its type, or one it aborts on."""


class BadName(Invalid):
    pass


class BaseNotFound(NotFound):
    pass


class NameTaken(Conflict):
    """A config of that name exists, with other files."""


class NoBaseFiles(Invalid):
    """The base's files cannot be read here (no runner's files reach the service)."""


def unnamed_name(base: str, options: Mapping[str, str]) -> str:
    """The name of `base` with a run entry's `options`: `<base>+<12 hex of their digest>`."""
    listing = "".join(f"{name}\0{options[name]}\n" for name in sorted(options))
    return f"{base}+{hashlib.sha256(listing.encode()).hexdigest()[:12]}"


def sha256s(files: Mapping[str, bytes]) -> dict[str, str]:
    return {name: hashlib.sha256(data).hexdigest() for name, data in sorted(files.items())}


def decide_derive(cmd: DeriveConfig, base: GpuConfig, files: Mapping[str, bytes], existing: GpuConfig | None) -> list[ev.GpuConfigDerived]:
    """The variant `cmd` asks for, of `base`, whose files are `files` (the base's with its
    options set); nothing when the same variant exists already (`existing`, the config of
    that name if any), refused when another config has the name or it has no core clock."""
    body = cmd.body
    if not body.options:
        raise BadOption(f"GPU config {body.name}: no options given; a variant sets at least one")
    if not _NAME.fullmatch(body.name):
        raise BadName(f"GPU config name {body.name!r}: letters, digits and _ . + - only, not starting with one of _ . + -")
    digests = sha256s(files)
    if existing is not None:
        if existing.digest == config_digest(digests):
            return []
        raise NameTaken(f"GPU config {body.name} exists already, with other files; choose another name")
    clock = core_clock_from_config(files[CONFIG_FILE].decode(errors="replace"))
    if clock is None:
        raise BadOption(f"the variant's {CONFIG_FILE} has no readable -gpgpu_clock_domains (its core clock)")
    return [
        ev.GpuConfigDerived(
            id=cmd.event_id, at=cmd.at, name=body.name, base=body.base, options=dict(sorted(body.options.items())),
            files=digests, arch=arch_from_config_name(body.name) or base.arch, core_clock_mhz=clock, unnamed=cmd.unnamed,
        )
    ]


def as_config(derived: ev.GpuConfigDerived) -> GpuConfig:
    return GpuConfig(
        name=derived.name, arch=derived.arch, core_clock_mhz=derived.core_clock_mhz, digest=config_digest(derived.files),
        base=derived.base, options=derived.options,
    )


def root_base(name: str, variants: Mapping[str, ev.GpuConfigDerived]) -> str:
    """The config a variant is derived from in the end (through variants of variants): the
    one a runner must have to run it."""
    seen = set()
    while name in variants and name not in seen:
        seen.add(name)
        name = variants[name].base
    return name


def differences(a: Mapping[str, str], b: Mapping[str, str]) -> list[OptionDifference]:
    """The options two configs set differently, by name."""
    return [OptionDifference(name, a.get(name), b.get(name)) for name in sorted(a.keys() | b.keys()) if a.get(name) != b.get(name)]
