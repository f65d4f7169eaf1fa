"""Accel-Sim as the runner's simulator (`simulator.Simulator`): an install on this machine,
where its configs, binary and libraries are, how a sim of it runs, and how its output reads
(`logparse`).

    <root>/gpu-simulator/gpgpu-sim/configs/tested-cfgs/<NAME>/gpgpusim.config (+ *.icnt, *.xml)
    <root>/gpu-simulator/configs/tested-cfgs/<NAME>/trace.config
    <root>/gpu-simulator/bin/release/accel-sim.out
    <root>/gpu-simulator/gpgpu-sim/lib/<gcc>/cuda-<version>/release/libcudart.so

The configs are read again whenever they change, so a config added or edited needs no
restart: each call of `configs` looks at the files' modification times and sizes (a few
`stat`s a config) and reads again only the configs whose files changed.

A sim's working directory holds copies of its config's files; the simulator runs there on
the trace's `kernelslist.g`, with GPGPU-Sim's libcudart on LD_LIBRARY_PATH and `xz` (which
reads `.traceg.xz` files) on PATH.
"""

from __future__ import annotations

import hashlib
import logging
import os
import secrets
import shutil
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import assert_never

from cascade_core import split
from cascade_core.gpu_configs import GpuConfig, arch_from_config_name, config_digest, core_clock_from_config
from cascade_core.sims import Outcome
from cascade_core.split import Launches
from cascade_sim import logparse
from cascade_sim.simulator import Command, Output, Versions

log = logging.getLogger("cascade.accelsim")


class AccelSimInstall:
    log_name = "accelsim.log.gz"

    def __init__(self, root: Path, binary: Path | None = None) -> None:
        if not root.is_absolute():
            # The simulator runs in a directory of its own, where a relative path means another place.
            raise ValueError(f"Accel-Sim needs an absolute path, not {root}")
        self.root = root
        self.binary = binary or root / "gpu-simulator" / "bin" / "release" / "accel-sim.out"
        self._read: dict[str, tuple[_Stamp, GpuConfig | None]] = {}  # by name: as last read, and of which files

    @property
    def tested_configs(self) -> Path:
        return self.root / "gpu-simulator" / "gpgpu-sim" / "configs" / "tested-cfgs"

    def configs(self) -> list[GpuConfig]:
        """Every config whose arch and clock can be read, sorted by name, with the digest of
        the files a sim of it copies; the others are skipped with a warning. A config is read
        again only when its files changed since it was last (`_stamp`)."""
        found = []
        read = {}
        for path in sorted(self.tested_configs.glob("*/gpgpusim.config")):
            name = path.parent.name
            stamp = _stamp(self.config_files(name))
            known = self._read.get(name)
            config = known[1] if known is not None and known[0] == stamp else self._config(name, path)
            read[name] = (stamp, config)
            if config is not None:
                found.append(config)
        self._read = read
        return found

    def _config(self, name: str, path: Path) -> GpuConfig | None:
        """The config of this name, or None (said in a warning) when it cannot be used."""
        arch = arch_from_config_name(name)
        try:
            clock = core_clock_from_config(path.read_text(errors="replace"))
            digest = config_digest(self.file_digests(name))
        except OSError as err:
            log.warning("skipping GPU config %s: cannot read %s (%s)", name, err.filename or path, err.strerror)
            return None
        if arch is None:
            log.warning("skipping GPU config %s: its name says no arch (expected SM<nn>_<GPU>)", name)
        elif clock is None:
            log.warning("skipping GPU config %s: no readable -gpgpu_clock_domains in %s", name, path)
        else:
            return GpuConfig(name=name, arch=arch, core_clock_mhz=clock, digest=digest)
        return None

    def config_files(self, name: str) -> list[Path]:
        """The files a sim of config `name` copies into its working directory."""
        source = self.tested_configs / name
        files = [source / "gpgpusim.config", *sorted(source.glob("*.icnt")), *sorted(source.glob("*.xml"))]
        trace_config = self.root / "gpu-simulator" / "configs" / "tested-cfgs" / name / "trace.config"
        if trace_config.is_file():
            files.append(trace_config)
        return [f for f in files if f.is_file()]

    def file_digests(self, name: str) -> dict[str, str]:
        """The sha256 of each file a sim of config `name` copies, by its name there."""
        return {source.name: _sha256(source) for source in self.config_files(name)}

    def build(self) -> str | None:
        """The sha256 of the simulator's binary, or None when it cannot be read."""
        try:
            return _sha256(self.binary)
        except OSError:
            return None

    def library_dirs(self) -> list[Path]:
        """GPGPU-Sim's libcudart.so folders, for LD_LIBRARY_PATH."""
        return sorted(p for p in (self.root / "gpu-simulator" / "gpgpu-sim" / "lib").glob("*/*/release") if p.is_dir())

    def prepare(self, config: GpuConfig, workdir: Path, *, source: Path | None = None) -> dict[str, str]:
        sources = self.config_files(config.name) if source is None else sorted(p for p in source.iterdir() if not p.name.startswith("."))
        for source in sources:
            shutil.copyfile(source, workdir / source.name)
        return {source.name: _sha256(workdir / source.name) for source in sources}  # what the sim reads

    def command(
        self, config: GpuConfig, workdir: Path, trace_dir: Path, env: Mapping[str, str], *, launches: Launches | None = None
    ) -> Command:
        kernelslist = trace_dir / "kernelslist.g" if launches is None else launches_kernelslist(trace_dir, launches)
        argv = [str(self.binary), "-trace", str(kernelslist), "-config", "./gpgpusim.config"]
        if (workdir / "trace.config").exists():
            argv += ["-config", "./trace.config"]
        environment = dict(env)
        libraries = [str(p) for p in self.library_dirs()]
        environment["LD_LIBRARY_PATH"] = os.pathsep.join([*libraries, env.get("LD_LIBRARY_PATH", "")]).strip(os.pathsep)
        xz = shutil.which("xz")
        if xz is not None:
            environment["PATH"] = os.pathsep.join([str(Path(xz).parent), env.get("PATH", "")])
        return Command(argv, environment, workdir)

    def reader(self) -> AccelSimOutput:
        return AccelSimOutput()


_Stamp = tuple[tuple[str, int, int, int], ...]


def _stamp(files: Sequence[Path]) -> _Stamp:
    """What tells that a config's files changed: each one's name, inode, size and modification
    time (in ns); an edit in place or a file replaced changes one of them."""
    stamp = []
    for file in files:
        try:
            stat = file.stat()
        except OSError:
            continue  # gone since it was listed: the next look sees that
        stamp.append((file.name, stat.st_ino, stat.st_size, stat.st_mtime_ns))
    return tuple(stamp)


def _sha256(path: Path) -> str:
    with path.open("rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()


def launches_kernelslist(trace_dir: Path, launches: Launches) -> Path:
    """The kernelslist of some of the trace's launches (a chunk's, a reusing sim's), written
    beside the trace's: the simulator reads the kernel files a list names relative to the
    list's own folder, and takes no other path for one."""
    path = trace_dir / launches.kernelslist
    if not path.is_file():
        lines = split.kernelslist_of((trace_dir / "kernelslist.g").read_text().splitlines(), launches)
        partial = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(3)}")
        partial.write_text("".join(f"{line}\n" for line in lines))
        partial.replace(path)  # sims of one trace running at once write the same list: whole, once or twice
    return path


class AccelSimOutput:
    """Accel-Sim's stdout read by `logparse.LogParser`, and its end judged by `logparse.outcome`."""

    stats_naming = logparse.STATS_NAMING

    def __init__(self) -> None:
        self.parser = logparse.LogParser()

    def feed(self, text: str) -> list[Output]:
        return _said(self.parser.feed(text))

    def finish(self) -> list[Output]:
        return _said(self.parser.finish())

    def outcome(self, returncode: int, stderr_tail: Sequence[str]) -> Outcome:
        exit_code, signal = (returncode, None) if returncode >= 0 else (None, -returncode)
        return logparse.outcome(exit_code, signal, self.parser.exit_detected, self.parser.error, stderr_tail)


def _said(outputs: list[logparse.Output]) -> list[Output]:
    """What the parser's outputs tell the runner; the rest only make the outcome."""
    said: list[Output] = []
    for out in outputs:
        match out:
            case logparse.Build():
                gpgpu_sim = " ".join(p for p in (out.gpgpu_sim_version, out.gpgpu_sim) if p) or None
                said.append(Versions(out.accel_sim, gpgpu_sim))
            case logparse.KernelLaunched() | logparse.KernelBlock() | logparse.Totals() | logparse.Stopped():
                said.append(out)
            case logparse.ExitDetected() | logparse.SimError():
                pass
            case _:
                assert_never(out)
    return said
