"""What Cascade reads from an Accel-Sim config directory: the arch its name implies, the
core clock its `gpgpusim.config` sets and the digest of its files; which configs a run
may name, from the local install's and the live runners'; and how a run's replicas of one
name are told apart when their files differ. Everything comes in as text or values; finding
the directories is the caller's job."""

from __future__ import annotations

import difflib
import hashlib
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Annotated

import msgspec

if TYPE_CHECKING:  # imported only for its type: `runners` imports `GpuConfig` from here
    from cascade_core.runners import Runner


class GpuConfig(msgspec.Struct, frozen=True, omit_defaults=True, kw_only=True):
    name: str
    arch: str
    core_clock_mhz: float
    digest: Annotated[
        str | None,
        msgspec.Meta(
            description="sha256 over the config's files (`gpu_configs.config_digest`), so two configs of one name "
            "that differ are told apart; null where it is not known."
        ),
    ] = None
    base: Annotated[str | None, msgspec.Meta(description="A variant's base config (absent for a config of files of its own).")] = None
    options: Annotated[
        dict[str, str] | None, msgspec.Meta(description="A variant's options, set in its base's gpgpusim.config (absent for others).")
    ] = None


class OfferedConfig(GpuConfig, frozen=True, kw_only=True):
    """A GPU config a run may name: one of this server's Accel-Sim install, or one a live
    runner announces, once per name and digest."""

    local: Annotated[bool, msgspec.Meta(description="Whether this server's own Accel-Sim install has it.")]
    runners: Annotated[list[str], msgspec.Meta(description="The live runners that have it, by id, sorted.")]


# SM90_H100 -> 90, SM7_QV100 -> 7. Accel-Sim names its tested configs this way.
_CONFIG_NAME = re.compile(r"SM([1-9][0-9]*)_.+")


def arch_from_config_name(name: str) -> str | None:
    """`sm_<nn>` from a config directory name, or None if the name does not say.
    A single digit is a major version only (SM7_QV100 is sm_70)."""
    match = _CONFIG_NAME.fullmatch(name)
    if match is None:
        return None
    digits = match.group(1)
    return f"sm_{digits}0" if len(digits) == 1 else f"sm_{digits}"


def core_clock_from_config(text: str) -> float | None:
    """The core clock in MHz: the first value of the first `-gpgpu_clock_domains` line
    that is not commented out (`-gpgpu_clock_domains 1417.0:1417.0:1417.0:2500.0`).
    None when there is no such line or its first value is not a positive number."""
    for line in text.splitlines():
        # GPGPU-Sim's option parser drops everything from '#' to the end of a line.
        tokens = line.split("#", 1)[0].split()
        if not tokens or tokens[0] != "-gpgpu_clock_domains":
            continue
        if len(tokens) < 2:
            return None
        try:
            clock = float(tokens[1].split(":", 1)[0])
        except ValueError:
            return None
        return clock if math.isfinite(clock) and clock > 0 else None
    return None


def suggested_config(arch: str, configs: Iterable[GpuConfig]) -> str | None:
    """The config to offer for a trace of `arch`: the first by name among those of the
    same arch, so the suggestion does not depend on discovery order."""
    names = sorted(config.name for config in configs if config.arch == arch)
    return names[0] if names else None


def config_digest(file_digests: Mapping[str, str]) -> str:
    """The digest of a config: sha256 over its files' names and sha256s (`sha256sum`'s lines,
    `<sha256>  <name>`, sorted by name), the same per-file digests a sim's launch records
    (`SimLaunched.config_digests`), so a sim's config digest follows from its launch."""
    lines = "".join(f"{file_digests[name]}  {name}\n" for name in sorted(file_digests))
    return hashlib.sha256(lines.encode()).hexdigest()


LABEL_HEX = 6  # a digest's hex digits in a config's label: enough to tell one run's versions of a config apart


def config_labels(sims: Iterable[tuple[str, str, Mapping[str, str] | None]]) -> dict[str, str]:
    """Each sim's config as a run's pooled answers show it, by sim id, from (sim id, config
    name, its launch's file digests): the name, or `NAME@<first 6 hex of config_digest>`
    when the sims of that name ran config files of more than one digest (a config edited in
    place, then replicas added), so that replicas of different files are never pooled. A
    sim not launched yet has no digest, keeps the name and counts for none."""
    listed = list(sims)
    digests: dict[str, set[str]] = {}
    for _, name, files in listed:
        if files is not None:
            digests.setdefault(name, set()).add(config_digest(files))
    return {
        sim_id: f"{name}@{config_digest(files)[:LABEL_HEX]}" if files is not None and len(digests[name]) > 1 else name
        for sim_id, name, files in listed
    }


def unknown_config(name: str, offered: Iterable[GpuConfig], arch: str | None) -> str:
    """Why a run of a trace of `arch` may not name config `name`: it is not offered, the
    offered configs that could run the trace, and the closest of those."""
    configs = list(offered)
    fitting = sorted({c.name for c in configs if c.arch == arch})
    others = len({c.name for c in configs} - set(fitting))
    closest = difflib.get_close_matches(name, fitting, n=1)
    listing = ", ".join(fitting) if fitting else "none"
    return (
        f"unknown GPU config {name}: no live runner has it, nor this server's Accel-Sim install "
        f"(configs offered for {arch or 'this'} traces: {listing}"
        + (f"; {others} more of other archs" if others else "")
        + ")"
        + (f"; did you mean {closest[0]}?" if closest else "")
    )


def offered(
    local: Sequence[GpuConfig], runners: Sequence[Runner], variants: Sequence[tuple[GpuConfig, str]] = ()
) -> list[OfferedConfig]:
    """The configs a run may name: the local install's and those the live runners announce,
    one per name and digest, sorted by name, then digest; and each variant (with the config
    it derives from in the end) whose base is offered, where its base is. A runner of an
    older version announces names only; it takes no request placed by config, so its names
    offer nothing."""
    where: dict[tuple[str, str], tuple[GpuConfig, bool, list[str]]] = {}
    for config in local:
        where[(config.name, config.digest or "")] = (config, True, [])
    for runner in runners:
        for config in runner.gpu_configs:
            where.setdefault((config.name, config.digest or ""), (config, False, []))[2].append(runner.id)
    bases: dict[str, tuple[bool, set[str]]] = {}
    for config, is_local, ids in where.values():
        here, there = bases.get(config.name, (False, set()))
        bases[config.name] = (here or is_local, there | set(ids))
    for variant, root in variants:
        if root in bases and (variant.name, variant.digest or "") not in where:
            base_local, base_runners = bases[root]
            where[(variant.name, variant.digest or "")] = (variant, base_local, sorted(base_runners))
    return [
        OfferedConfig(**msgspec.structs.asdict(config), local=is_local, runners=sorted(ids))
        for config, is_local, ids in (where[key] for key in sorted(where))
    ]
