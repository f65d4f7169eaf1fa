"""GPU config commands and reads: derive a variant (check its options, store its files, append
its event), show a config, and what it sets and how two configs differ, option by option.
Decided with `cascade_core.variants` under the one conflict rule (`conflicts.py`)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping, Sequence

import anyio
import msgspec

from cascade_app import clock
from cascade_app.conflicts import Decision, decided
from cascade_app.service import Cascade
from cascade_core import variants as decide
from cascade_core.gpu_configs import GpuConfig
from cascade_core.object_names import config_file
from cascade_core.refusals import NotFound
from cascade_core.runs import RunEntry
from cascade_core.variants import BadOption, BaseNotFound, ConfigDerive, NoBaseFiles, OptionDifference
from cascade_formats import gpgpusim_options
from cascade_host import new_ids
from cascade_nats import subjects
from cascade_sim.variant_files import read_files, variants


async def derive_config(c: Cascade, *, name: str, base: str, options: Mapping[str, str], unnamed: bool = False) -> GpuConfig:
    """Config `name`: `base` with `options` set in its gpgpusim.config, its files in the object
    store and its event appended; the same variant again changes nothing. `unnamed`: a run
    entry's own options' variant."""
    body = msgspec.convert({"name": name, "base": base, "options": dict(options)}, ConfigDerive)
    check_options(body.options)

    async def derive() -> Decision[GpuConfig]:
        last = await c.store.last_on(subjects.gpu_config(name))
        offered = {config.name: _plain(config) for config in await c.gpu_configs()}
        base_config = offered.get(base)
        if base_config is None:
            raise BaseNotFound(f"base GPU config {base} not found: no live runner has it, nor this server's Accel-Sim install")
        base_files = await _files(c, base)
        config_text = base_files[decide.CONFIG_FILE].decode(errors="replace")
        files = {**base_files, decide.CONFIG_FILE: gpgpusim_options.with_options(config_text, body.options).encode()}
        command = decide.DeriveConfig(event_id=new_ids.event_id(), at=clock.now(), body=body, unnamed=unnamed)
        events = decide.decide_derive(command, base_config, files, offered.get(name))
        for event in events:
            await _store_files(c, files, event.files)
        outcome = decide.as_config(events[0]) if events else offered[name]
        return Decision(events, 0 if last is None else last.seq, outcome)

    return await decided(c, derive)


def check_options(options: Mapping[str, str]) -> None:
    """Refused (`BadOption`) when an option is one the simulator does not know, or its value is not of its type."""
    try:
        gpgpusim_options.check(options)
    except gpgpusim_options.InvalidOption as err:
        raise BadOption(str(err)) from err


async def derive_entry_options(c: Cascade, entries: Sequence[RunEntry]) -> None:
    """Each run entry's own options' unnamed variant (`RunEntry.sim_config`), derived (so
    checked, its files stored) before the run names it."""
    for entry in entries:
        if entry.options:
            await derive_config(c, name=entry.sim_config, base=entry.gpu_config, options=entry.options, unnamed=True)


async def _store_files(c: Cascade, files: Mapping[str, bytes], digests: Mapping[str, str]) -> None:
    """The files in the object store under their sha256, those not there already."""
    for file_name, sha256 in digests.items():
        name = config_file(sha256)
        if await c.objects.stat(name) is None:

            async def content(data: bytes = files[file_name]) -> AsyncIterator[bytes]:
                yield data

            await c.objects.put(name, content())


def _plain(config: GpuConfig) -> GpuConfig:
    """A config as `GpuConfig`, whatever subclass lists it (an offered one says where it is)."""
    return msgspec.convert(msgspec.to_builtins(config), GpuConfig, strict=False) if type(config) is not GpuConfig else config


async def show_config(c: Cascade, name: str) -> GpuConfig:
    """The config a run may name `name` (a variant with its base and options)."""
    for config in await c.gpu_configs():
        if config.name == name:
            return _plain(config)
    raise NotFound(f"GPU config {name} not found")


async def _files(c: Cascade, name: str) -> dict[str, bytes]:
    """Config `name`'s files: a variant's from the object store, another's from this server's
    Accel-Sim install (a runner's files do not reach the service)."""
    known = await variants(c.store)
    if name in known:
        return await read_files(c.objects, known[name].files)
    install = c.install
    paths = [] if install is None else install.config_files(name)
    if not paths:
        raise NoBaseFiles(
            f"GPU config {name}: its files are not on this server (it reads a config's options from its own Accel-Sim "
            "install, CASCADE_ACCELSIM_DIR, or a variant's from the object store)"
        )
    return await anyio.to_thread.run_sync(lambda: {path.name: path.read_bytes() for path in paths})


async def config_options(c: Cascade, name: str) -> dict[str, str]:
    """What config `name` sets: its gpgpusim.config's options (a variant's: its base's with its own)."""
    await show_config(c, name)
    files = await _files(c, name)
    return gpgpusim_options.read_config(files[decide.CONFIG_FILE].decode(errors="replace"))


async def config_diff(c: Cascade, a: str, b: str) -> list[OptionDifference]:
    """The options configs `a` and `b` set differently, by name."""
    return decide.differences(await config_options(c, a), await config_options(c, b))
