"""Record real Accel-Sim logs of reuse kernelslists for the fake simulator (issue 16 item 2)."""
import sys, shutil, json
from pathlib import Path
sys.path.insert(0, "/work/research/i16/scripts")
import common
from common import run_sim, srv_paths, parse_log

ROOT = Path("/tmp/i16-reuse-rec")
common.ROOT = ROOT
common.RAW = ROOT / "raw"
common.TRACES = ROOT / "traces"
TR = ROOT / "traces"
SH = Path("/work/shared/accelsim/traces")

def trace_copy(name, src):
    d = TR / name
    if not d.exists():
        d.mkdir(parents=True)
        for f in (SH / src).iterdir():
            shutil.copy(f, d / f.name)
    return d

x40 = trace_copy("matrixmul-x40", "matrixmul-x40")
rep = TR / "combo-repeat"
if not rep.exists():
    rep.mkdir(parents=True)
    for f in ("kernel-1.traceg", "kernel-2.traceg.xz"):
        shutil.copy(SH / "combo-vec-mm-xz" / f, rep / f)
    (rep / "kernelslist.g").write_text((SH / "combo-vec-mm-xz" / "kernelslist.g").read_text() * 3)

def reuse_list(d, keep):
    lines = [l for l in (d / "kernelslist.g").read_text().splitlines() if l.strip()]
    out, pending, n = [], [], 0
    for l in lines:
        if l.startswith("kernel"):
            n += 1
            if n in keep:
                out += pending + [l]
            pending = []
        else:
            pending.append(l)
    p = d / "kernelslist.reuse.g"
    p.write_text("".join(x + "\n" for x in out))
    return p

runs = [
    (rep / "kernelslist.g", "combo-repeat__SM61_TITANX__seq"),
    (reuse_list(rep, {1, 2, 3, 5}), "combo-repeat__SM61_TITANX__reuse"),
    (reuse_list(x40, {1, 2}), "matrixmul-x40__SM61_TITANX__reuse"),
]
for kl, name in runs:
    m = run_sim(kl, name)
    print(name, m["rc"], round(m["wall_s"], 1), round(m["cpu_user_s"] + m["cpu_sys_s"], 1), flush=True)
