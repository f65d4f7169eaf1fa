"""The fake accel-sim.out, run the way Cascade runs the real one, in a temp copy of the
shared Accel-Sim tree."""

from __future__ import annotations

import lzma
import os
import shutil
import signal
import stat
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from cascade_sim.logparse import KernelBlock, LogParser, outcome

SHARED = Path("/work/shared/accelsim")
LOGS = SHARED / "logs"
TRACES = SHARED / "traces"
FAKE = Path(__file__).parents[1] / "fake_accelsim" / "accel-sim.out"
HEADER_STATS = (
    "kernel line : count latency dram_traffic smem_bk_conflicts smem_warp "
    "gmem_access_generated gmem_warp exposed_latency warp_divergence\n"
)

Run = Callable[..., subprocess.CompletedProcess[bytes]]


def writable_copy(source: Path, target: Path) -> Path:
    """A copy of a read-only shared tree that tests may change."""
    shutil.copytree(source, target, dirs_exist_ok=True, copy_function=shutil.copyfile)
    for path in [target, *target.rglob("*")]:
        if path.is_dir():
            path.chmod(0o755)
    return target


@pytest.fixture(scope="module")
def accelsim(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = writable_copy(SHARED / "tree", tmp_path_factory.mktemp("accelsim"))
    binary = root / "gpu-simulator/bin/release/accel-sim.out"
    binary.parent.mkdir(parents=True)
    shutil.copyfile(FAKE, binary)
    binary.chmod(binary.stat().st_mode | stat.S_IXUSR)
    return root


def workdir(accelsim: Path, tmp_path: Path, config: str) -> Path:
    """A fresh working directory holding copies of the config's files, as Cascade makes."""
    cwd = tmp_path / "work"
    cwd.mkdir()
    for f in (accelsim / "gpu-simulator/gpgpu-sim/configs/tested-cfgs" / config).iterdir():
        shutil.copyfile(f, cwd / f.name)
    shutil.copyfile(accelsim / "gpu-simulator/configs/tested-cfgs" / config / "trace.config", cwd / "trace.config")
    return cwd


def command(accelsim: Path, trace: Path, *extra: str) -> list[str]:
    binary = accelsim / "gpu-simulator/bin/release/accel-sim.out"
    return [str(binary), "-trace", str(trace / "kernelslist.g"), "-config", "./gpgpusim.config", "-config", "./trace.config", *extra]


@pytest.fixture
def run(accelsim: Path, tmp_path: Path) -> Run:
    def run(config: str, trace: Path, *extra: str, edit: Callable[[Path], None] | None = None) -> subprocess.CompletedProcess[bytes]:
        cwd = workdir(accelsim, tmp_path, config)
        if edit is not None:
            edit(cwd)
        return subprocess.run(command(accelsim, trace, *extra), cwd=cwd, capture_output=True, timeout=30)

    return run


def trace_copy(tmp_path: Path, name: str) -> Path:
    return writable_copy(TRACES / name, tmp_path / "traces" / name)


@pytest.mark.parametrize(
    "config, trace, log",
    [
        ("SM61_TITANX", "vectoradd-100-32", "vectoradd-100-32__SM61_TITANX.log"),
        ("SM7_QV100", "vectoradd-100-32", "vectoradd-100-32__SM7_QV100.log"),
        ("SM86_RTX3070", "vectoradd-100-32", "vectoradd-100-32__SM86_RTX3070.log"),
        ("SM61_TITANX", "combo-vec-mm-xz", "combo-vec-mm-xz__SM61_TITANX.log"),
        ("SM7_QV100", "combo-vec-mm-xz", "combo-vec-mm-xz__SM7_QV100.log"),
    ],
)
def test_replays_the_recorded_log(run: Run, tmp_path: Path, config: str, trace: str, log: str) -> None:
    done = run(config, TRACES / trace)
    assert (done.returncode, done.stderr) == (0, b"")
    assert done.stdout == (LOGS / log).read_bytes()
    cwd = tmp_path / "work"
    assert (cwd / "gpgpu_inst_stats.txt").read_text() == HEADER_STATS
    assert len(HEADER_STATS) == 133
    assert (cwd / "checkpoint_files").is_dir() and not list((cwd / "checkpoint_files").iterdir())


def test_output_parses_as_a_successful_run(run: Run) -> None:
    done = run("SM61_TITANX", TRACES / "combo-vec-mm-xz")
    parser = LogParser()
    text = done.stdout.decode()
    out = [o for i in range(0, len(text), 65536) for o in parser.feed(text[i : i + 65536])] + parser.finish()
    assert len([o for o in out if isinstance(o, KernelBlock)]) == 3
    assert outcome(done.returncode, None, parser.exit_detected, parser.error, []).succeeded


def test_max_cycle_from_the_config_file(run: Run) -> None:
    def edit(cwd: Path) -> None:
        with (cwd / "gpgpusim.config").open("a") as f:
            f.write("\n-gpgpu_max_cycle 1000\n")

    done = run("SM61_TITANX", TRACES / "vectoradd-100-32", edit=edit)
    assert done.returncode == 0
    assert done.stdout == (LOGS / "failures/max-cycle.stdout").read_bytes()


def test_liveness_from_trace_config(run: Run) -> None:
    def edit(cwd: Path) -> None:
        with (cwd / "trace.config").open("a") as f:
            f.write("-trace_enabled 1\n-trace_components LIVENESS\n-liveness_message_freq 0\n")

    done = run("SM61_TITANX", TRACES / "vectoradd-100-32", edit=edit)
    assert done.returncode == 0
    assert done.stdout == (LOGS / "liveness-progress__SM61_TITANX.log").read_bytes()


def test_unknown_option(run: Run) -> None:
    done = run("SM61_TITANX", TRACES / "vectoradd-100-32", "-no_such_option", "1")
    assert done.returncode == 1
    assert done.stdout == (LOGS / "failures/unknown-option.stdout").read_bytes()
    assert done.stderr == (LOGS / "failures/unknown-option.stderr").read_bytes()


def test_missing_icnt(run: Run) -> None:
    done = run("SM61_TITANX", TRACES / "vectoradd-100-32", edit=lambda cwd: (cwd / "config_pascal_islip.icnt").unlink())
    assert done.returncode == 255
    assert done.stdout == (LOGS / "failures/missing-icnt.stdout").read_bytes()
    assert done.stderr == (LOGS / "failures/missing-icnt.stderr").read_bytes()


def test_missing_kernel_file(run: Run, tmp_path: Path) -> None:
    trace = trace_copy(tmp_path, "vectoradd-100-32")
    with (trace / "kernelslist.g").open("a") as f:
        f.write("kernel-9.traceg\n")
    done = run("SM61_TITANX", trace)
    assert done.returncode == 0
    assert done.stdout == (LOGS / "failures/missing-traceg.stdout").read_bytes()
    assert done.stderr.decode() == f"cat: {trace / 'kernel-9.traceg'}: No such file or directory\n"


def relabel(trace: Path, version: int) -> None:
    kernel = trace / "kernel-1.traceg"
    kernel.write_text(kernel.read_text().replace("-binary version = 61\n", f"-binary version = {version}\n", 1))


def test_unsupported_binary_version(run: Run, tmp_path: Path) -> None:
    trace = trace_copy(tmp_path, "vectoradd-100-32")
    relabel(trace, 90)
    done = run("SM7_QV100", trace)
    assert (done.returncode, done.stderr) == (0, b"")
    assert done.stdout == (LOGS / "failures/unsupported-binary-version.stdout").read_bytes()


def test_pascal_trace_relabelled_volta_aborts(run: Run, tmp_path: Path) -> None:
    trace = trace_copy(tmp_path, "vectoradd-100-32")
    relabel(trace, 70)
    done = run("SM7_QV100", trace)
    assert done.returncode == -signal.SIGABRT
    assert done.stdout == (LOGS / "failures/undefined-instruction.stdout").read_bytes()
    assert done.stderr == (LOGS / "failures/undefined-instruction.stderr").read_bytes()
    assert not list((tmp_path / "work").glob("core*"))


def test_no_recording(run: Run) -> None:
    done = run("SM61_TITANX", TRACES / "matrixmul-32-32")
    assert (done.returncode, done.stdout) == (1, b"")
    assert b"_Z8mult_gpuIfEvPT_S1_S1_ii" in done.stderr and b"SM61_TITANX" in done.stderr


def test_changed_config_has_no_recording(run: Run) -> None:
    def edit(cwd: Path) -> None:
        with (cwd / "gpgpusim.config").open("a") as f:
            f.write("-gpgpu_n_clusters 14\n")

    done = run("SM61_TITANX", TRACES / "vectoradd-100-32", edit=edit)
    assert done.returncode == 1
    assert b"not one of tested-cfgs" in done.stderr


def test_compressed_kernel_file_is_read(tmp_path: Path, run: Run) -> None:
    trace = trace_copy(tmp_path, "combo-vec-mm-xz")
    with lzma.open(trace / "kernel-2.traceg.xz") as f:
        assert b"-kernel name = _Z8mult_gpuIfEvPT_S1_S1_ii" in f.read(200)
    assert run("SM7_QV100", trace).returncode == 0


def test_sigterm_mid_run(accelsim: Path, tmp_path: Path) -> None:
    cwd = workdir(accelsim, tmp_path, "SM7_QV100")
    env = {**os.environ, "CASCADE_FAKE_ACCELSIM_PACE": "20"}
    with subprocess.Popen(
        command(accelsim, TRACES / "combo-vec-mm-xz"), cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    ) as proc:
        assert proc.stdout is not None
        seen = b""
        line = b""
        while not line.startswith(b"gpgpu_silicon_slowdown = "):
            line = proc.stdout.readline()
            assert line, "the fake ended before its first stats block"
            seen += line
        proc.send_signal(signal.SIGTERM)
        rest, _ = proc.communicate(timeout=10)
    assert proc.returncode == -signal.SIGTERM
    assert (LOGS / "combo-vec-mm-xz__SM7_QV100.log").read_bytes().startswith(seen + rest)
    assert b"uid: 3" not in seen + rest


def test_logs_dir_and_line_delay_from_the_environment(accelsim: Path, tmp_path: Path) -> None:
    logs = writable_copy(LOGS, tmp_path / "logs")
    recorded = logs / "vectoradd-100-32__SM61_TITANX.log"
    recorded.write_bytes(recorded.read_bytes().replace(b"gpu_sim_cycle = 5534\n", b"gpu_sim_cycle = 1\n"))
    env = {**os.environ, "CASCADE_FAKE_ACCELSIM_LOGS": str(logs), "CASCADE_FAKE_ACCELSIM_LINE_DELAY": "0.00001"}
    cwd = workdir(accelsim, tmp_path, "SM61_TITANX")
    done = subprocess.run(command(accelsim, TRACES / "vectoradd-100-32"), cwd=cwd, env=env, capture_output=True, timeout=30)
    assert done.returncode == 0
    assert done.stdout == recorded.read_bytes()
