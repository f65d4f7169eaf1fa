"""Record real Accel-Sim logs of the kernelslists reusing sims simulate, for the fake simulator
(issue 16 item 2): a sim's `kernelslist.reuse.g` and a split sim's chunks'
`kernelslist.<chunk>.reuse.g` (cascade_core/reuse.py). Runs with /work/research/i16/scripts/
common.py's `run_sim`, on copies of the shared traces under /tmp/i16-reuse-rec/traces/, plus
combo-repeat: the combo trace's kernelslist.g three times over. MANIFEST.md lists the logs."""
import shutil
import sys
from pathlib import Path

sys.path.insert(0, "/work/research/i16/scripts")
import common  # noqa: E402
from common import run_sim  # noqa: E402

ROOT = Path("/tmp/i16-reuse-rec")
common.ROOT, common.RAW, common.TRACES = ROOT, ROOT / "raw", ROOT / "traces"
SHARED = Path("/work/shared/accelsim/traces")


def trace_copy(name: str, source: str, repeat: int = 1) -> Path:
    d = common.TRACES / name
    if not d.exists():
        d.mkdir(parents=True)
        for f in (SHARED / source).iterdir():
            shutil.copy(f, d / f.name)
        (d / "kernelslist.g").write_text((SHARED / source / "kernelslist.g").read_text() * repeat)
    return d


def write(d: Path, name: str, launches: set[int]) -> Path:
    """kernelslist.<name>.g: these launches of the trace's, each with the memcpys before it."""
    out, pending, n = [], [], 0
    for line in (l for l in (d / "kernelslist.g").read_text().splitlines() if l.strip()):
        if line.startswith("kernel"):
            n += 1
            if n in launches:
                out += pending + [line]
            pending = []
        else:
            pending.append(line)
    p = d / f"kernelslist.{name}.g"
    p.write_text("".join(x + "\n" for x in out))
    return p


x40, rep = trace_copy("matrixmul-x40", "matrixmul-x40"), trace_copy("combo-repeat", "combo-vec-mm-xz", 3)
RUNS = [
    (rep / "kernelslist.g", "combo-repeat__SM61_TITANX__seq"),
    (write(rep, "reuse", {1, 2, 3, 5}), "combo-repeat__SM61_TITANX__reuse"),
    (write(x40, "reuse", {1, 2}), "matrixmul-x40__SM61_TITANX__reuse"),
    (write(x40, "k1-20.reuse", {1, 2}), "matrixmul-x40__SM61_TITANX__k1-20.reuse"),
    (write(x40, "w2_k21-40.reuse", {19, 20, 21, 22}), "matrixmul-x40__SM61_TITANX__w2_k21-40.reuse"),
    (write(rep, "k1-5.reuse", {1, 2, 3, 5}), "combo-repeat__SM61_TITANX__k1-5.reuse"),
    (write(rep, "w2_k6-9.reuse", {4, 5, 6, 7, 8}), "combo-repeat__SM61_TITANX__w2_k6-9.reuse"),
]
for kernelslist, name in RUNS:
    meta = run_sim(kernelslist, name)
    print(name, meta["rc"], round(meta["wall_s"], 1), round(meta["cpu_user_s"] + meta["cpu_sys_s"], 1), flush=True)
