"""An Accel-Sim install on this machine: where its configs, binary and libraries are.

    <root>/gpu-simulator/gpgpu-sim/configs/tested-cfgs/<NAME>/gpgpusim.config (+ *.icnt, *.xml)
    <root>/gpu-simulator/configs/tested-cfgs/<NAME>/trace.config
    <root>/gpu-simulator/bin/release/accel-sim.out
    <root>/gpu-simulator/gpgpu-sim/lib/<gcc>/cuda-<version>/release/libcudart.so
"""

from __future__ import annotations

import logging
from pathlib import Path

from cascade_core.gpu_configs import arch_from_config_name, core_clock_from_config
from cascade_core.models import GpuConfig

log = logging.getLogger("cascade.accelsim")


class AccelSimInstall:
    def __init__(self, root: Path, binary: Path | None = None) -> None:
        self.root = root
        self.binary = binary or root / "gpu-simulator" / "bin" / "release" / "accel-sim.out"

    @property
    def tested_configs(self) -> Path:
        return self.root / "gpu-simulator" / "gpgpu-sim" / "configs" / "tested-cfgs"

    def configs(self) -> list[GpuConfig]:
        """Every config whose arch and clock can be read, sorted by name; the others are
        skipped with a warning."""
        found = []
        for path in sorted(self.tested_configs.glob("*/gpgpusim.config")):
            name = path.parent.name
            arch = arch_from_config_name(name)
            try:
                clock = core_clock_from_config(path.read_text(errors="replace"))
            except OSError as err:
                log.warning("skipping GPU config %s: cannot read %s (%s)", name, path, err.strerror)
                continue
            if arch is None:
                log.warning("skipping GPU config %s: its name says no arch (expected SM<nn>_<GPU>)", name)
            elif clock is None:
                log.warning("skipping GPU config %s: no readable -gpgpu_clock_domains in %s", name, path)
            else:
                found.append(GpuConfig(name=name, arch=arch, core_clock_mhz=clock))
        return found

    def config_files(self, name: str) -> list[Path]:
        """The files a sim of config `name` copies into its working directory."""
        source = self.tested_configs / name
        files = [source / "gpgpusim.config", *sorted(source.glob("*.icnt")), *sorted(source.glob("*.xml"))]
        trace_config = self.root / "gpu-simulator" / "configs" / "tested-cfgs" / name / "trace.config"
        if trace_config.is_file():
            files.append(trace_config)
        return [f for f in files if f.is_file()]

    def library_dirs(self) -> list[Path]:
        """GPGPU-Sim's libcudart.so folders, for LD_LIBRARY_PATH."""
        return sorted(p for p in (self.root / "gpu-simulator" / "gpgpu-sim" / "lib").glob("*/*/release") if p.is_dir())
