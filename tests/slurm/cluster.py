"""A real single-node Slurm cluster for a test: munged with a key of its own, slurmctld and
slurmd in the foreground on free loopback ports, every file in a fresh directory, reached
through SLURM_CONF. There is no slurmdbd, so no accounting database: sacct answers from the
job completion log (`sacct -c`, JobCompType=jobcomp/filetxt). Skips, saying why, when Slurm
or munge is not installed (`.ci/run` installs Debian's `slurm-wlm` and `munge`) or the test
does not run as root (slurmd starts jobs as their user)."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from tests.support import stop

COMMANDS = ("munged", "slurmctld", "slurmd", "sbatch", "squeue", "sacct", "scontrol", "scancel", "sinfo")
PARTITION = "cascade"


class Cluster:
    def __init__(self, root: Path, name: str) -> None:
        self.root = root
        self.name = name
        self.env = {**os.environ, "SLURM_CONF": str(root / "slurm.conf")}

    def run(self, *argv: str) -> str:
        return subprocess.run(argv, env=self.env, check=True, capture_output=True, text=True, timeout=30).stdout

    def job(self, job_id: str) -> dict[str, str]:
        """`scontrol show job` of a job, as its fields."""
        return dict(w.split("=", 1) for w in self.run("scontrol", "show", "job", "-o", job_id).split() if "=" in w)

    def queued(self) -> set[str]:
        return set(self.run("squeue", "--noheader", "--format", "%i").split())


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _config(root: Path, name: str) -> str:
    return f"""ClusterName={name}
SlurmctldHost=localhost(127.0.0.1)
SlurmctldPort={_free_port()}
SlurmdPort={_free_port()}
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket={root}/munge.socket
StateSaveLocation={root}/state
SlurmdSpoolDir={root}/spool
SlurmctldPidFile={root}/slurmctld.pid
SlurmdPidFile={root}/slurmd.pid
SlurmctldLogFile={root}/slurmctld.log
SlurmdLogFile={root}/slurmd.log
ProctrackType=proctrack/pgid
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/filetxt
JobCompLoc={root}/jobcomp.txt
SchedulerType=sched/builtin
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
ReturnToService=2
MinJobAge=600
KillWait=5
MpiDefault=none
NodeName=localhost NodeAddr=127.0.0.1 CPUs={os.cpu_count() or 1} RealMemory=1000 State=UNKNOWN
PartitionName={PARTITION} Nodes=localhost Default=YES MaxTime=INFINITE State=UP
"""


def _wait(what: str, ready: object, timeout: float, logs: list[Path]) -> None:
    deadline = time.monotonic() + timeout
    while not ready():  # type: ignore[operator]
        if time.monotonic() > deadline:
            tails = "\n".join(f"{p}:\n{p.read_text()[-2000:]}" for p in logs if p.exists())
            raise AssertionError(f"{what} did not come up in {timeout} s\n{tails}")
        time.sleep(0.2)


@contextmanager
def slurm_cluster() -> Iterator[Cluster]:
    missing = [c for c in COMMANDS if shutil.which(c) is None]
    if missing:
        pytest.skip(f"Slurm or munge is not installed (no {', '.join(missing)}): apt-get install slurm-wlm munge")
    if os.geteuid() != 0:
        pytest.skip("a Slurm of its own needs root: slurmd starts jobs as their user")
    # Short: munged's socket path must fit a sockaddr_un.
    root = Path(tempfile.mkdtemp(prefix="slurm-", dir="/tmp"))
    root.chmod(0o711)  # munged wants its socket's directory searchable by all (the key stays 0400)
    name = f"cascade{root.name.removeprefix('slurm-').lower().replace('_', '')}"[:30]
    for d in ("state", "spool"):
        (root / d).mkdir()
    key = root / "munge.key"
    key.write_bytes(os.urandom(1024))
    key.chmod(0o400)
    (root / "slurm.conf").write_text(_config(root, name))
    cluster = Cluster(root, name)
    daemons: list[subprocess.Popen[bytes]] = []

    def start(*argv: str, log: str) -> None:
        with (root / log).open("ab") as out:
            daemons.append(subprocess.Popen(argv, env=cluster.env, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL))

    logs = [root / n for n in ("munged.out", "munged.log", "slurmctld.log", "slurmd.log", "slurmctld.out", "slurmd.out")]
    try:
        start(
            "munged", "-F", f"--key-file={key}", f"--socket={root}/munge.socket", f"--pid-file={root}/munged.pid",
            f"--log-file={root}/munged.log", f"--seed-file={root}/munge.seed", log="munged.out",
        )
        _wait("munged", (root / "munge.socket").exists, 10, logs)
        start("slurmctld", "-D", "-i", log="slurmctld.out")
        _wait("slurmctld", lambda: subprocess.run(["scontrol", "ping"], env=cluster.env, capture_output=True).returncode == 0, 20, logs)
        start("slurmd", "-D", "-N", "localhost", log="slurmd.out")
        _wait("slurmd", lambda: cluster.run("sinfo", "--noheader", "--format", "%T").strip() == "idle", 30, logs)
        yield cluster
    finally:
        try:
            if daemons and daemons[-1].poll() is None:
                subprocess.run(["scancel", "--full", "--user", "root"], env=cluster.env, capture_output=True, timeout=30)
                _wait("the jobs' end", lambda: not cluster.queued(), 30, logs)
        finally:
            for daemon in reversed(daemons):
                stop(daemon)
            shutil.rmtree(root, ignore_errors=True)
