"""A heartbeat's lines read back whichever way the runner packed them: xz (now), zlib (older
heartbeats) or plain text (older still)."""

from __future__ import annotations

import zlib
from datetime import UTC, datetime

from cascade_core import events as ev
from cascade_nats import deflated
from cascade_sim import sim_report

LINES = ["GPGPU-Sim version 4.2.0", "kernel_name = _Z6vecAddIfEvPT_S1_S1_i", "L2_total_cache_accesses = 39", "é ünïcode"]


def _beat(**log: object) -> ev.SimHeartbeat:
    return ev.SimHeartbeat(
        id="e1", at=datetime(2026, 12, 5, tzinfo=UTC), run_id="r", sim_id="s", attempt=1, kernels_done=0,
        current_kernel=None, latest=ev.SimMetrics(), first_line_seq=1, **log,  # type: ignore[arg-type]
    )


def test_a_heartbeats_lines_read_the_same_as_xz_as_zlib_and_as_text() -> None:
    text = "\n".join(LINES)
    packed = sim_report.deflated(LINES)
    assert packed is not None and packed.startswith(b"\xfd7zXZ\x00")
    beats = [_beat(log_deflated=packed), _beat(log_deflated=zlib.compress(text.encode())), _beat(log=text)]
    for beat in beats:
        assert deflated.log_text(beat) == ev.log_text(beat) == text
        assert deflated.log_utf8(beat) == ev.log_utf8(beat) == text.encode()
        assert ev.lines_in(deflated.log_text(beat)) == len(LINES)
    assert sim_report.deflated([]) is None
