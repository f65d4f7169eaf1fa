"""Slurm's words, read: sacct's and scontrol's account of a finished job, and how many jobs a
queue needs. The lines are as Slurm 22.05 (Debian 12's slurm-wlm) printed them."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from cascade_core import slurm
from cascade_core.slurm import JobEnd, Plan, plan

SCONTROL = (
    "JobId=7 JobName=cascade-worker UserId=root(0) GroupId=root(0) MCS_label=N/A Priority=4294901759 Nice=0 Account=(null) "
    "QOS=(null) JobState=TIMEOUT Reason=TimeLimit Dependency=(null) Requeue=1 Restarts=0 BatchFlag=1 Reboot=0 ExitCode=0:15 "
    "RunTime=00:01:20 TimeLimit=00:01:00 TimeMin=N/A"
)


def test_scontrol_gives_the_state_reason_and_exit_code_of_its_job_only() -> None:
    assert slurm.parse_scontrol(SCONTROL, "7") == JobEnd(job_id="7", state="TIMEOUT", exit_code="0:15", reason="TimeLimit")
    assert slurm.parse_scontrol(SCONTROL, "70") is None
    assert slurm.parse_scontrol("slurm_load_jobs error: Invalid job id specified", "7") is None


def test_sacct_gives_the_state_and_what_follows_it() -> None:
    text = "12|CANCELLED by 0|0:0|None\n13|OUT_OF_MEMORY|0:125|None\n"
    assert slurm.parse_sacct(text, "12") == JobEnd(job_id="12", state="CANCELLED", exit_code="0:0", reason="None", detail="by 0")
    assert slurm.parse_sacct(text, "13") == JobEnd(job_id="13", state="OUT_OF_MEMORY", exit_code="0:125", reason="None")
    assert slurm.parse_sacct("", "14") is None  # not in the accounting database (yet)


@pytest.mark.parametrize(
    "end, line",
    [
        (JobEnd(job_id="7", state="TIMEOUT", exit_code="0:15", reason="TimeLimit"), "Slurm job 7 ended: TIMEOUT (reason TimeLimit, exit code 0:15)"),
        (
            JobEnd(job_id="12", state="CANCELLED", exit_code="0:0", reason="None", detail="by 0"),
            "Slurm job 12 ended: CANCELLED (by 0, exit code 0:0)",
        ),
        (
            JobEnd(job_id="9", state="UNKNOWN", reason="Slurm no longer knows the job"),
            "Slurm job 9 ended: UNKNOWN (reason Slurm no longer knows the job)",
        ),
    ],
)
def test_a_jobs_end_in_one_line(end: JobEnd, line: str) -> None:
    assert end.describe() == line


def test_only_a_limit_of_the_job_fails_its_sims_at_once() -> None:
    at = datetime(2026, 12, 1, tzinfo=UTC)
    for state, fails in [("TIMEOUT", True), ("OUT_OF_MEMORY", True), ("DEADLINE", True), ("PREEMPTED", False), ("NODE_FAIL", False), ("FAILED", False)]:
        assert slurm.limit_reached(slurm.ended("r", JobEnd(job_id="1", state=state), event_id="e", at=at)) is fails


@pytest.mark.parametrize(
    "demand, free, waiting, jobs, expected",
    [
        (0, 0, 0, 0, Plan(0, 0)),  # nothing to do
        (5, 0, 0, 0, Plan(3, 0)),  # 5 requests, 2 slots a job: 3 jobs
        (5, 0, 0, 3, Plan(1, 0)),  # up to the limit of 4
        (5, 1, 1, 1, Plan(1, 0)),  # a free slot and a job coming cover 3 of them
        (1, 4, 0, 2, Plan(0, 0)),  # live runners take it
        (0, 0, 2, 2, Plan(0, 2)),  # the queue emptied before two jobs started
        (3, 0, 3, 3, Plan(0, 1)),
    ],
)
def test_jobs_follow_the_queue_up_to_the_limit(demand: int, free: int, waiting: int, jobs: int, expected: Plan) -> None:
    assert plan(demand=demand, free_slots=free, waiting_jobs=waiting, jobs=jobs, slots_per_job=2, max_jobs=4) == expected
