from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import msgspec

from tests.cascade_formats.timeline_fixture import build_timeline, sim_cycles_csv

CASCADE = [sys.executable, "-m", "cascade_cli", "timeline"]


def test_offline_timeline_reproduces_the_reference_request(tmp_path: Path) -> None:
    (tmp_path / "step_timeline.json").write_bytes(msgspec.json.encode(build_timeline()))
    (tmp_path / "kernel-stats.csv").write_text(sim_cycles_csv())
    args = ["--timeline", str(tmp_path / "step_timeline.json"), "--kernels", str(tmp_path / "kernel-stats.csv"), "--clock-mhz", "1132"]

    summary = subprocess.run([*CASCADE, *args, "-o", str(tmp_path / "out.json")], capture_output=True, text=True, check=True)
    assert "6 of 683 kernels simulated" in summary.stdout
    assert "TTFT     6.707 ms simulated vs 6.700 ms real" in summary.stdout

    out = json.loads((tmp_path / "out.json").read_text())
    (request,) = out["compare"]["requests"]
    assert request["ttft_ms"] == {"real": 6.7, "simulated": 6.707260692579508, "error": 0.00726069257950801, "error_pct": 0.10836854596280611}
    assert request["e2e_ms"]["simulated"] == 24.082871667844532

    as_json = subprocess.run([*CASCADE, *args, "--json"], capture_output=True, text=True, check=True)
    assert json.loads(as_json.stdout) == out


def test_bad_inputs_are_one_clear_line(tmp_path: Path) -> None:
    (tmp_path / "t.json").write_text('{"meta": {}, "steps": [], "requests": "no"}')
    (tmp_path / "k.csv").write_text(sim_cycles_csv())
    out = subprocess.run([*CASCADE, "--timeline", str(tmp_path / "t.json"), "--kernels", str(tmp_path / "k.csv"), "--clock-mhz", "1132"],
                         capture_output=True, text=True)
    assert out.returncode == 2 and out.stderr.startswith("cascade: error: ") and "requests" in out.stderr
    missing = subprocess.run([*CASCADE, "--timeline", str(tmp_path / "nope.json"), "--kernels", str(tmp_path / "k.csv"), "--clock-mhz", "1"],
                             capture_output=True, text=True)
    assert missing.returncode == 2 and "nope.json: No such file or directory" in missing.stderr
