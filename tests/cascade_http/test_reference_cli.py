"""`cascade run ... --reference` and `cascade sim reference SIM` against a real server whose
runner drives the fake simulator (combo split per kernel with 2 warm-up launches: exact)."""

from __future__ import annotations

import json

import msgspec

from cascade_api.models import ReferenceComparison, RunDetail
from tests.cascade_http.live import LiveServer
from tests.cascade_http.test_runs_cli import cascade, live, tree, upload_combo

__all__ = ["live", "tree"]  # the fixtures, shared with the runs CLI's tests


def test_a_split_run_with_references_and_the_comparison_from_the_command_line(live: LiveServer) -> None:
    upload_combo(live)
    created = cascade(live, "run", "combo", "SM61_TITANX", "--split", "1", "--reference", "--watch", "--json")
    assert created.returncode == 0, created.stderr
    run = msgspec.json.decode(created.stdout, type=RunDetail)
    fast, ref = run.sims
    assert run.entries[0].reference and ref.reference_for == fast.id and (ref.split, ref.reuse) == (None, False)

    shown = cascade(live, "sim", "reference", fast.id)
    assert shown.returncode == 0, shown.stderr
    lines = shown.stdout.splitlines()
    assert lines[0] == f"sim        {fast.id}  SM61_TITANX  (split 1 a chunk, warm-up 2)"
    assert lines[1] == f"reference  {ref.id}  (whole, in sequence; the same config files)"
    assert lines[2].startswith("wall       ") and "x faster" in lines[2]
    assert lines[3] == "cycles     18,448 against 18,448: +0.000% over 3 kernels, 3 exact, worst +0.000% (launch 1)"
    assert lines[6].split() == ["launch", "kernel", "cycles", "reference", "error", "insn", "error", "reused", "from"]
    assert [line.split()[0] for line in lines[7:]] == ["1", "2", "3"]

    as_json = cascade(live, "sim", "reference", fast.id, "--json")
    compared = msgspec.json.decode(as_json.stdout, type=ReferenceComparison)
    assert compared.reference.sim_id == ref.id and compared.totals.exact == 3 and compared.speedup is not None

    watched = cascade(live, "sim", "reference", fast.id, "--watch")  # the run has ended: at once
    assert watched.returncode == 0 and watched.stdout.splitlines()[-4:] == lines[-4:], watched.stderr

    refused = cascade(live, "sim", "reference", ref.id)
    assert refused.returncode != 0
    assert f"sim {ref.id} is the reference of sim {fast.id}; a reference has no reference of its own" in refused.stderr
    assert json.loads(cascade(live, "run", "show", run.id, "--json").stdout)["sim_counts"] == {"succeeded": 2}
    assert f"  SM61_TITANX r1 {ref.id} of {fast.id}" in cascade(live, "run", "show", run.id).stdout.splitlines()
