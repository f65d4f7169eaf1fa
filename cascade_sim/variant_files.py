"""Config variants as the runner and the service find them: every variant's definition, from
its own subject (`cascade.ev.config.<name>`), and a variant's files on the runner's disk,
fetched from the object store once and kept by the config's digest, so a runner that has a
variant's base runs it with no file copied by hand and no restart."""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import shutil
from collections import defaultdict
from collections.abc import Mapping
from pathlib import Path

from cascade_core import events as ev
from cascade_core.gpu_configs import config_digest
from cascade_core.object_names import config_file
from cascade_nats import subjects
from cascade_nats.objects import Objects
from cascade_nats.store import EventStore

COMPLETE = ".complete"


class VariantUnavailable(RuntimeError):
    pass


async def variants(store: EventStore) -> dict[str, ev.GpuConfigDerived]:
    """Every config variant, by name (a name's first definition: a later one is never decided)."""
    found: dict[str, ev.GpuConfigDerived] = {}
    async with contextlib.aclosing(store.read(subjects.CONFIGS)) as stored:
        async for item in stored:
            if isinstance(item.event, ev.GpuConfigDerived):
                found.setdefault(item.event.name, item.event)
    return found


async def read_files(objects: Objects, files: Mapping[str, str]) -> dict[str, bytes]:
    """A variant's files (by name: sha256), from the object store."""
    return {name: await objects.read_all(config_file(sha256)) for name, sha256 in sorted(files.items())}


class VariantFiles:
    """Variants' files on this runner's disk, one directory per config digest."""

    def __init__(self, root: Path, objects: Objects) -> None:
        self.root = root
        self.objects = objects
        self._locks: defaultdict[str, asyncio.Lock] = defaultdict(asyncio.Lock)

    async def fetch(self, variant: ev.GpuConfigDerived) -> Path:
        """A local directory holding the variant's files, downloaded if this runner lacks them."""
        key = config_digest(variant.files)
        final = self.root / key
        async with self._locks[key]:
            if (final / COMPLETE).exists():
                return final
            partial = self.root / f"{key}.partial"
            shutil.rmtree(partial, ignore_errors=True)
            partial.mkdir(parents=True)
            try:
                contents = await read_files(self.objects, variant.files)
            except Exception as err:  # noqa: BLE001 - missing, damaged or unreachable: the attempt fails saying so
                raise VariantUnavailable(f"GPU config {variant.name}: its files cannot be read from the object store ({err!r})") from err
            for name, data in contents.items():
                if hashlib.sha256(data).hexdigest() != variant.files[name] or "/" in name:
                    raise VariantUnavailable(f"GPU config {variant.name}: its stored file {name} is not the one it was derived with")
                (partial / name).write_bytes(data)
            (partial / COMPLETE).touch()
            shutil.rmtree(final, ignore_errors=True)
            partial.rename(final)
            return final
