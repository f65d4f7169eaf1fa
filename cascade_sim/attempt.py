"""Running one sim attempt: a fresh working directory the simulator's backend prepares, the
simulator started as the backend says, its output turned into events as it is printed
(`sim_report.SimReport`, reading it through the backend's reader), its files stored, and
the outcome the backend judges.

The output is read in pieces as it comes and never held whole: each piece goes to the
gzipped log file, to the log lines that heartbeats carry, and to the streaming parser, whose
kernel results become events at once. While NATS is away the events wait in the sender,
and once it holds as many as it may, the output is read no further until they are sent:
the simulator then waits on its own pipe. Its files are stored however long that takes too.
"""

from __future__ import annotations

import asyncio
import codecs
import contextlib
import ctypes
import fcntl
import logging
import os
import shutil
import signal
from collections import deque
from collections.abc import AsyncIterator
from pathlib import Path
from typing import BinaryIO

import anyio
from isal import isal_zlib

from cascade_core.object_names import sim_file
from cascade_core.sims import Outcome
from cascade_formats.kernel_stats import kernel_stats_csv
from cascade_nats.objects import Objects, StoredObject
from cascade_nats.supervise import retry
from cascade_sim.event_sender import EventSender
from cascade_sim.sim_report import Launch, SimReport, content_type
from cascade_sim.simulator import Simulator

log = logging.getLogger("cascade.runner")

HEARTBEAT_S = 2.0
LAUNCH_WAIT_S = 2.0  # how long the launch event waits for the simulator's build strings
# The simulator's stdout pipe: 1 MiB (Linux's most for a process without privileges) rather
# than the default 64 KiB, so a simulator printing fast runs ahead of a runner busy parsing,
# instead of waiting for it after every 64 KiB, each wait a trip through the scheduler; and
# read up to 256 KiB at a time (what asyncio's pipe transport reads at once), a quarter of the
# turns of the loop below (bench/README.md, "The runner's wire").
PIPE_SIZE = 1 << 20
READ_SIZE = 256 * 1024
STDERR_TAIL = 50
# How much the simulator yields the CPU: a sim is batch work that takes every core it is
# given, while the service's answers and the runner's parsing of its output wait on a person.
# It costs the simulators nothing on cores nothing else wants.
SIMULATOR_NICENESS = 10
# Cascade's secrets that may be in the runner's environment (`cascade_app.config.ENV`): the
# API token, and the NATS URL with its credentials. The simulator needs neither.
WITHHELD = ("CASCADE_TOKEN", "CASCADE_NATS_URL")


class Stop:
    """The runner ends a sim before it ends by itself: its run was cancelled, another attempt
    replaced this one (`SimReport.current` says which), or it ran too long (`timed_out`)."""

    def __init__(self) -> None:
        self.requested = asyncio.Event()
        self.timed_out = False

    def request(self, *, timed_out: bool = False) -> None:
        if not self.requested.is_set():
            self.timed_out = timed_out
            self.requested.set()


def stored_name(relative: Path) -> str:
    """A file the simulator wrote, as a sim file name (letters, digits, `.`, `_`, `-`)."""
    name = "__".join(relative.parts)
    return "".join(c if c.isalnum() or c in "._-" else "_" for c in name)[:128]


def log_compressor() -> isal_zlib.Compress:
    """What writes the stored log in gzip's format: ISA-L, faster than zlib's fastest level
    for a file a little smaller (bench/README.md, "ISA-L instead of zlib")."""
    return isal_zlib.compressobj(1, isal_zlib.DEFLATED, 16 + isal_zlib.MAX_WBITS)


def _child_setup() -> None:
    """In the simulator's process before it starts: it dies with the runner, it is a process
    group of its own (so a stop reaches all it started) but not a session of its own (with the
    kernel's autogroups on, a session is a scheduling group of its own that its niceness does
    not lower, and 32 of them left serve a 33rd of the CPU), it yields the CPU to the service
    (`SIMULATOR_NICENESS`), and its stdout pipe holds `PIPE_SIZE`. (The process group is made
    here because uvloop, which serve runs on, takes no `process_group`.)"""
    ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    os.setpgid(0, 0)
    os.nice(SIMULATOR_NICENESS)
    with contextlib.suppress(OSError):  # past /proc/sys/fs/pipe-max-size: the default stays
        fcntl.fcntl(1, fcntl.F_SETPIPE_SZ, PIPE_SIZE)


class Attempt:
    def __init__(
        self,
        *,
        report: SimReport,
        simulator: Simulator,
        objects: Objects,
        sender: EventSender,
        workdir: Path,
        trace_dir: Path,
        host: str,
        stop: Stop,
        grace_s: float = 5.0,
        timeout_s: float | None = None,
        launcher_ref: str | None = None,
    ) -> None:
        self.job = report.job
        self.simulator = simulator
        self.objects = objects
        self.sender = sender
        self.workdir = workdir
        self.trace_dir = trace_dir
        self.host = host
        self.stop = stop
        self.grace_s = grace_s
        self.timeout_s = timeout_s
        self.launcher_ref = launcher_ref  # what the sim runs under, when not its own pid (a Slurm job)
        self.report = report
        self.stderr_tail: deque[str] = deque(maxlen=STDERR_TAIL)
        self.inputs: dict[str, str] = {}  # what the backend put in the working directory, by name: sha256
        self.process: asyncio.subprocess.Process | None = None

    def _environment(self) -> dict[str, str]:
        return {name: value for name, value in os.environ.items() if name not in WITHHELD}

    async def run(self) -> Outcome | None:
        """Run to the end and store the files; the simulator's outcome, or None when another
        attempt owns the sim now and nothing more is to be said."""
        shutil.rmtree(self.workdir, ignore_errors=True)
        self.workdir.mkdir(parents=True)
        config = self.job.gpu_config
        self.inputs = self.simulator.prepare(config, self.workdir, source=self.job.config_files)
        command = self.simulator.command(config, self.workdir, self.trace_dir, self._environment(), launches=self.job.launches)
        log_path = self.workdir.parent / f"{self.workdir.name}.{self.simulator.log_name}"
        self.process = await asyncio.create_subprocess_exec(
            *command.argv,
            cwd=command.cwd,
            env=command.env,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            preexec_fn=_child_setup,
            limit=1 << 20,
        )
        self.report.launch = Launch(launcher_ref=self.launcher_ref or str(self.process.pid), host=self.host, config_digests=self.inputs)
        log.info("sim %s attempt %d: pid %d runs %s", self.job.sim_id, self.job.attempt, self.process.pid, " ".join(command.argv))
        gz = log_compressor()
        with log_path.open("wb") as log_file:
            ticker = asyncio.create_task(self._tick())
            stopper = asyncio.create_task(self._stop_when_asked())
            try:
                await asyncio.gather(self._read_stdout(log_file, gz), self._read_stderr())
                returncode = await self.process.wait()
            except asyncio.CancelledError:
                # The runner is stopping: the simulator must not outlive this attempt, and is
                # reaped before the loop closes (a Slurm job's end stops every worker so).
                self._signal(signal.SIGKILL)
                with anyio.CancelScope(shield=True):
                    await self.process.wait()
                raise
            finally:
                ticker.cancel()
                stopper.cancel()
            log_file.write(gz.flush())
        self.report.end_of_output()
        if not self.report.current:
            return None
        result = self.report.outcome(returncode, list(self.stderr_tail))
        await self._store_files(result, log_path)
        return result

    async def _read_stdout(self, log_file: BinaryIO, gz: isal_zlib.Compress) -> None:
        assert self.process is not None and self.process.stdout is not None
        decoder = codecs.getincrementaldecoder("utf-8")("replace")
        while True:
            await self.sender.room()
            piece = await self.process.stdout.read(READ_SIZE)
            if not piece:
                return
            log_file.write(gz.compress(piece))
            self.report.stdout(decoder.decode(piece))

    async def _read_stderr(self) -> None:
        assert self.process is not None and self.process.stderr is not None
        while True:
            await self.sender.room()
            raw = await self.process.stderr.readline()
            if not raw:
                return
            line = raw.decode(errors="replace").rstrip("\n")
            self.stderr_tail.append(line)
            self.report.add_lines(line)

    async def _tick(self) -> None:
        await asyncio.sleep(LAUNCH_WAIT_S)
        self.report.launched_once()
        while True:
            if not self.sender.full:  # one more would only wait too, with nothing new to say
                self.report.heartbeat()
            await asyncio.sleep(HEARTBEAT_S)

    async def _stop_when_asked(self) -> None:
        try:
            await asyncio.wait_for(self.stop.requested.wait(), self.timeout_s)
        except TimeoutError:
            self.stop.request(timed_out=True)
        assert self.process is not None
        self._signal(signal.SIGTERM)
        try:
            await asyncio.wait_for(self.process.wait(), self.grace_s)
        except TimeoutError:
            self._signal(signal.SIGKILL)

    def _signal(self, sig: signal.Signals) -> None:
        assert self.process is not None
        try:
            os.killpg(self.process.pid, sig)
        except ProcessLookupError:
            pass

    async def _store_files(self, result: Outcome, log_path: Path) -> None:
        """What the sim leaves, stored and announced just before the final heartbeat."""
        inputs = set(self.inputs)
        files: list[tuple[str, Path | bytes]] = [
            (self.simulator.log_name, log_path),
            ("exit-status.txt", f"{result.exit_code}\n".encode()),
            ("kernel-stats.csv", kernel_stats_csv(self.report.kernels)),
        ]
        for path in sorted(self.workdir.rglob("*")):
            relative = path.relative_to(self.workdir)
            if path.is_file() and str(relative) not in inputs:
                files.append((stored_name(relative), path))
        for name, source in files:
            name = self.job.file_name(name)
            object_name = sim_file(self.job.sim_id, self.job.attempt, name)
            stored = await self._put(object_name, source)
            self.report.file_stored(name=name, size=stored.size, object_name=object_name, digest=stored.digest)
        self.report.heartbeat()
        log_path.unlink(missing_ok=True)

    async def _put(self, object_name: str, source: Path | bytes) -> StoredObject:
        """Store a file, trying again until NATS takes it."""
        kind = content_type(object_name)

        async def put() -> StoredObject:
            return await self.objects.put(object_name, _content(source), content_type=kind)

        return await retry(f"sim {self.job.sim_id}.{self.job.attempt}: storing {object_name}", put, self.sender.supervision)


async def _content(source: Path | bytes) -> AsyncIterator[bytes]:
    if isinstance(source, bytes):
        yield source
        return
    with source.open("rb") as f:
        while piece := f.read(1 << 20):
            yield piece
