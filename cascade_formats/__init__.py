"""File formats of Accel-Sim and the tools around it: pure functions over their text.

A trace's `kernelslist.g`, kernel headers and `cascade.json` (`tracefiles`), real timing
files from Cascade's CSV, ncu and nsys (`realtiming`), step timelines (`timeline`), the
runner's `kernel-stats.csv` (`kernel_stats`), Perfetto's Chrome trace JSON (`perfetto`) and
C++ kernel symbols (`kernel_names`). These read and write what other programs do; the
domain in `cascade_core` never imports them, it is given what they read (`trace_contents`).
"""
