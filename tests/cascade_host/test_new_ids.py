"""Every new id keeps the form the log and the API already hold."""

from __future__ import annotations

import re

from cascade_core.ids import is_trace_id
from cascade_host import new_ids


def test_each_kind_of_id_keeps_its_form() -> None:
    forms = {
        new_ids.event_id(): r"[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}",
        new_ids.trace_id(): r"trace-[0-9a-f]{12}",
        new_ids.upload_id(): r"[0-9a-f]{16}",
        new_ids.timing_id(): r"timing-[0-9a-f]{12}",
        new_ids.trace_deleted_id(): r"delete\.[0-9a-f]{16}",
        new_ids.run_id(): r"run-[0-9a-f]{12}",
        new_ids.sim_id(): r"sim-[0-9a-f]{12}",
        new_ids.runner_id("gpu-7"): r"gpu-7-[0-9a-f]{6}",
        new_ids.idempotency_key(): r"[0-9a-f]{32}",
        new_ids.inbox("pipe"): r"_INBOX\.pipe\.[0-9a-f]{16}",
        new_ids.object_chunks_id(): r"[0-9a-f]{22}",
    }
    assert [made for made, form in forms.items() if not re.fullmatch(form, made)] == []
    assert is_trace_id(new_ids.trace_id()) and new_ids.sim_id() != new_ids.sim_id()
