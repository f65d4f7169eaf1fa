"""Slurm, pure: what its accounting says of a job that ended, what that means for the sims
its worker held, and how many worker jobs a queue needs. The commands themselves (sbatch,
squeue, sacct, scontrol, scancel) are run at the edge, by `cascade_process/slurm.py`.

A Cascade worker in a Slurm job is a runner like any other (it pulls launch requests from
JetStream); what Slurm adds is a job that may be ended under it. Slurm says how:

- a limit the job reached (TIMEOUT, OUT_OF_MEMORY, DEADLINE) fails the sims it held at once,
  with Slurm's words: another attempt under the same limits would end the same way, and
  waste an allocation doing so;
- anything else that ended it while it held sims (PREEMPTED, NODE_FAIL, BOOT_FAIL, a
  CANCELLED by someone, the worker FAILED) makes them lost, as a runner that stopped
  answering makes them: the next attempt runs elsewhere, up to the attempt limit, and the
  last failure says what Slurm said.
"""

from __future__ import annotations

import math
from datetime import datetime

import msgspec

from cascade_core import events as ev

LAUNCHER = "slurm"  # `RunnerEnded.launcher` of a Slurm job
# States in which the job hit a limit of its own: the sims it held fail, rather than run again.
LIMITS = frozenset({"TIMEOUT", "OUT_OF_MEMORY", "DEADLINE"})
# sacct and scontrol write `None` (or nothing) where a job has no reason.
_NO_REASON = frozenset({"", "None", "(null)"})


class JobEnd(msgspec.Struct, frozen=True, kw_only=True):
    """A finished job as Slurm accounts for it: `state` (the first word of sacct's State,
    which may go on with `by <uid>`), `exit_code` as Slurm writes it (`code:signal`), and
    its `reason`, when Slurm gives one."""

    job_id: str
    state: str
    exit_code: str | None = None
    reason: str | None = None
    detail: str | None = None  # the rest of the state: `by 0` for a CANCELLED

    @property
    def completed(self) -> bool:
        """The worker ended by itself (idle long enough), holding nothing."""
        return self.state == "COMPLETED"

    def describe(self) -> str:
        """One line for the sims it held: what Slurm said, as it said it."""
        said = [part for part in (self.detail, _reason(self.reason), self.exit_code and f"exit code {self.exit_code}") if part]
        return f"Slurm job {self.job_id} ended: {self.state}" + (f" ({', '.join(said)})" if said else "")


def _reason(reason: str | None) -> str | None:
    return None if reason is None or reason in _NO_REASON else f"reason {reason}"


def parse_sacct(text: str, job_id: str) -> JobEnd | None:
    """The job's line of `sacct -X -n -P -o JobID,State,ExitCode,Reason -j JOB`, None when
    accounting does not have it (yet)."""
    for line in text.splitlines():
        fields = line.split("|")
        if len(fields) >= 4 and fields[0] == job_id:
            state, _, detail = fields[1].strip().partition(" ")
            return JobEnd(job_id=job_id, state=state, exit_code=fields[2] or None, reason=fields[3] or None, detail=detail or None)
    return None


def parse_scontrol(text: str, job_id: str) -> JobEnd | None:
    """The job as `scontrol show job -o JOB` has it (while Slurm keeps it, MinJobAge), None
    for another job or none."""
    fields = dict(word.split("=", 1) for word in text.split() if "=" in word)
    if fields.get("JobId") != job_id or "JobState" not in fields:
        return None
    return JobEnd(job_id=job_id, state=fields["JobState"], exit_code=fields.get("ExitCode"), reason=fields.get("Reason"))


def runner_id(cluster: str, job_id: str) -> str:
    """The runner a worker in job `job_id` of Slurm cluster `cluster` is: one per job, known to
    both the worker (from its environment) and the launcher (from sbatch)."""
    return f"slurm-{cluster}-{job_id}"


def ended(runner: str, end: JobEnd, *, event_id: str, at: datetime) -> ev.RunnerEnded:
    """The fact that the job's runner was ended, as Slurm tells it."""
    return ev.RunnerEnded(
        id=event_id, at=at, runner_id=runner, launcher=LAUNCHER, launcher_ref=end.job_id, state=end.state, reason=end.describe()
    )


def limit_reached(end: ev.RunnerEnded) -> bool:
    """Whether the runner's end fails the sims it held at once (a limit the job reached)."""
    return end.launcher == LAUNCHER and end.state in LIMITS


class Plan(msgspec.Struct, frozen=True):
    """What the launcher does next: jobs to submit, and how many of its jobs still waiting
    for a node to cancel (the queue no longer needs them)."""

    submit: int
    cancel_waiting: int


def plan(*, demand: int, free_slots: int, waiting_jobs: int, jobs: int, slots_per_job: int, max_jobs: int) -> Plan:
    """Jobs for a queue. `demand`: launch requests no live runner holds; `free_slots`: what the
    live runners can take now; `waiting_jobs`: jobs of ours not running a worker yet (each will
    bring `slots_per_job`); `jobs`: all of ours, at most `max_jobs`. Idle workers end by
    themselves, so scaling down only ever cancels jobs that have not started."""
    uncovered = max(0, demand - free_slots)
    needed = math.ceil(uncovered / slots_per_job)  # jobs still to come, the waiting ones included
    if needed < waiting_jobs:
        return Plan(submit=0, cancel_waiting=waiting_jobs - needed)
    return Plan(submit=max(0, min(needed - waiting_jobs, max_jobs - jobs)), cancel_waiting=0)
