"""Accel-Sim behind the simulator seam (`cascade_sim/simulator.py`), as the runner uses it:
a prepared working directory, the command, the fake simulator's output read into kernel
results and progress, and the outcome. No NATS."""

from __future__ import annotations

import hashlib
import shutil
import subprocess
from pathlib import Path

import pytest

from cascade_core.gpu_configs import config_digest
from cascade_core.sims import Outcome
from cascade_sim import simulator
from cascade_sim.install import AccelSimInstall
from tests.cascade_sim.world import TITANX, accelsim_tree
from tests.support import TRACES


def run(backend: simulator.Simulator, workdir: Path, trace: Path) -> tuple[list[simulator.Output], simulator.OutputReader, int, list[str]]:
    (config,) = [c for c in backend.configs() if c.name == "SM61_TITANX"]
    workdir.mkdir()
    inputs = backend.prepare(config, workdir)
    command = backend.command(config, workdir, trace, {"PATH": "/usr/bin:/bin"})
    done = subprocess.run(command.argv, cwd=command.cwd, env=command.env, capture_output=True, check=False)
    reader = backend.reader()
    said = reader.feed(done.stdout.decode()) + reader.finish()
    assert inputs == {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in workdir.iterdir() if p.name in inputs}
    return said, reader, done.returncode, done.stderr.decode().splitlines()


def test_accelsim_runs_a_trace_through_the_seam(tmp_path: Path) -> None:
    backend = AccelSimInstall(accelsim_tree(tmp_path / "accel-sim"))
    said, reader, returncode, _ = run(backend, tmp_path / "sim", TRACES / "combo-vec-mm-xz")
    kernels = [o for o in said if isinstance(o, simulator.KernelBlock)]
    assert [k.uid for k in kernels] == [1, 2, 3]
    assert any(isinstance(o, simulator.Totals) for o in said)
    (versions,) = [o for o in said if isinstance(o, simulator.Versions)]
    assert versions.accel_sim_build and versions.gpgpu_sim_build
    assert reader.outcome(returncode, []) == Outcome(True, 0, None)
    assert reader.stats_naming == 2 and backend.log_name == "accelsim.log.gz"


def test_accelsim_judges_a_failed_run_by_its_own_rule(tmp_path: Path) -> None:
    tree = accelsim_tree(tmp_path / "accel-sim")
    (tree / TITANX / "config_pascal_islip.icnt").unlink()
    said, reader, returncode, stderr = run(AccelSimInstall(tree), tmp_path / "sim", TRACES / "vectoradd-100-32")
    assert not [o for o in said if isinstance(o, simulator.KernelBlock)]
    outcome = reader.outcome(returncode, stderr)
    assert (outcome.succeeded, outcome.exit_code) == (False, 255)
    assert outcome.error == "Could not open configuration file config_pascal_islip.icnt"
    assert reader.outcome(-15, []).error == "killed by signal 15 (SIGTERM)"


def test_accelsim_needs_an_absolute_root() -> None:
    with pytest.raises(ValueError, match="absolute"):
        AccelSimInstall(Path("accel-sim"))


def test_configs_are_read_again_when_their_files_change(tmp_path: Path) -> None:
    root = accelsim_tree(tmp_path / "accel-sim")
    backend = AccelSimInstall(root)
    before = {c.name: c.digest for c in backend.configs()}
    assert backend.configs() == backend.configs(), "unchanged files are not read again, and read the same"
    (root / TITANX / "gpgpusim.config").write_text((root / TITANX / "gpgpusim.config").read_text() + "-gpgpu_n_clusters 14\n")
    shutil.copytree(root / TITANX, root / TITANX.with_name("SM61_TITANX_EDITED"))
    after = {c.name: c.digest for c in backend.configs()}
    assert after.keys() == before.keys() | {"SM61_TITANX_EDITED"}
    assert after["SM61_TITANX"] != before["SM61_TITANX"]
    assert after["SM61_TITANX"] == config_digest(backend.file_digests("SM61_TITANX"))
    assert {name: digest for name, digest in after.items() if not name.startswith("SM61_")} == {
        name: digest for name, digest in before.items() if not name.startswith("SM61_")
    }
