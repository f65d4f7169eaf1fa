"""Step timelines of a run's sims, computed when asked for.

A sim has one once it succeeded on a trace with a step timeline: the trace's measured
`step_timeline.json` (stored with the upload, under `accelsim-traces/<trace>/`) replayed with
the sim's kernel times (`cascade_formats.timeline`). Everything it depends on is in the log, so
it is computed on read rather than stored as an event of several megabytes. Parsed timelines
are kept per trace and each sim's encoded answer per (sim, last kernel sequence, config
label), both in small LRU caches: a succeeded sim's kernels never change, so neither does its
answer but its label (once a replica of its config runs other files).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from datetime import datetime

import anyio
import msgspec

from cascade_app.lru import Lru
from cascade_api.models import RunDetail
from cascade_core.object_names import trace_file
from cascade_formats.timeline import TIMELINE_FILE, StepTimeline, TimelineError, step_timeline, validate_timeline
from cascade_nats.objects import ObjectMissing, Objects
from projections.queries.runs import SimKernelTimes

log = logging.getLogger("cascade.timelines")

_encoder = msgspec.json.Encoder()


class StepTimelines:
    def __init__(self, objects: Objects, *, traces: int = 8, sims: int = 128) -> None:
        self.objects = objects
        self._timelines: Lru[tuple[str, datetime], StepTimeline] = Lru(traces)
        self._answers: Lru[tuple[str, int, str | None], bytes] = Lru(sims)

    async def encoded(self, run: RunDetail, times: Callable[[], Awaitable[list[SimKernelTimes]]]) -> bytes:
        """The JSON list of SimStepTimeline for the run's succeeded sims in what `times()`
        reads, in the order of `run.sims`; `[]` when the trace has no step timeline, without
        reading them (a run of 100k kernels holds 100k times)."""
        if not run.trace.has_step_timeline:
            return b"[]"
        timeline = await self._timeline(run)
        if timeline is None:
            return b"[]"
        by_sim = {t.sim_id: t for t in await times()}
        parts = []
        for sim in run.sims:
            kernel_times = by_sim.get(sim.id)
            if kernel_times is None:
                continue
            key = (sim.id, kernel_times.last_seq, kernel_times.config_label)
            part = self._answers.get(key)
            if part is None:
                result = await anyio.to_thread.run_sync(
                    step_timeline, sim.id, sim.gpu_config, sim.replica, timeline, kernel_times.sim_ns, kernel_times.config_label
                )
                part = _encoder.encode(result)
                self._answers[key] = part
            parts.append(part)
        return b"[" + b",".join(parts) + b"]"

    async def _timeline(self, run: RunDetail) -> StepTimeline | None:
        trace = run.trace
        key = (trace.id, trace.created_at)
        timeline = self._timelines.get(key)
        if timeline is not None:
            return timeline
        try:
            raw = await self.objects.read_all(trace_file(trace.id, TIMELINE_FILE))
            timeline = await anyio.to_thread.run_sync(validate_timeline, raw, trace.kernel_count)
        except ObjectMissing:
            log.warning("trace %s has a step timeline but no %s in the object store", trace.id, TIMELINE_FILE)
            return None
        except TimelineError as err:
            log.warning("trace %s: its %s is not usable: %s", trace.id, TIMELINE_FILE, err)
            return None
        self._timelines[key] = timeline
        return timeline
