"""How fast `POST /api/traces` ingests a big trace, and how much memory the service uses
meanwhile, against plain `tar -x` of the same archive.

Generates a trace of about --size-gb GB in a temp dir: kernel files made of instruction lines
in the tracer's format (from the shared vectoradd trace, with fresh addresses), most of them
plain `.traceg`, every --xz-every'th one `.traceg.xz` (its header and body as two xz streams,
as `xz -dc` reads them), and a kernelslist.g naming them all. It tars the directory, starts
`cascade serve` (embedded NATS, --no-runner) on a fresh data dir, and streams the archive to
it from disk in 1 MiB pieces while sampling the server process's resident memory (VmRSS,
and VmHWM, the kernel's peak) and counting its and nats-server's CPU time. Then it times
`tar -xf` of the same archive into an empty dir, without and with the `sync` that waits for
its files to reach the disk. Both read the archive from the page cache, and each starts after
a `sync`. Last, `cascade trace upload` sends the directory itself (a tar made on the fly),
to the same server; the memory peak covers both uploads.

    .venv/bin/python bench/trace_upload_bench.py [--size-gb 1.1] [--xz-every 5] [--work-dir DIR]
"""

from __future__ import annotations

import argparse
import json
import lzma
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

from cascade_cli.client import ApiClient

TRACE = Path("/work/shared/accelsim/traces/vectoradd-100-32/kernel-1.traceg")
TREE = Path("/work/shared/accelsim/tree")
TOKEN = "bench-token"
KERNEL_BYTES = 4 << 20
XZ_BODY_BYTES = 8 << 20


def body_block(size: int, rng: random.Random) -> bytes:
    """Instruction lines like the tracer's, with random memory addresses so the text
    compresses about as well as a real trace does."""
    text = TRACE.read_text()
    header, _, rest = text.partition("#BEGIN_TB")
    lines = [line for line in rest.splitlines() if line[:4].strip() and line[0] in "0123456789abcdef"]
    out: list[str] = []
    written = 0
    while written < size:
        line = rng.choice(lines)
        fields = line.split()
        fields = [f"0x{rng.getrandbits(40):010x}" if f.startswith("0x") else f for f in fields]
        text_line = " ".join(fields) + "\n"
        out.append(text_line)
        written += len(text_line)
    return "".join(out).encode()[:size]


def header(uid: int) -> bytes:
    text = TRACE.read_text()
    head = text[: text.index("#BEGIN_TB")]
    return head.replace("_Z6vecAddIfEvPT_S1_S1_i", f"_Z6kernel{uid}IfEvPT_S1_S1_i").encode() + b"#BEGIN_TB\n"


def make_trace(directory: Path, size: int, xz_every: int) -> tuple[int, int, int]:
    """Write the trace; returns (kernels, xz files, bytes written)."""
    rng = random.Random(7)
    directory.mkdir(parents=True)
    plain_body = body_block(KERNEL_BYTES, rng)
    xz_body = lzma.compress(body_block(XZ_BODY_BYTES, rng), preset=1)
    kernels = xz_files = written = 0
    lines = []
    while written < size:
        kernels += 1
        if kernels % xz_every == 0:
            name, data = f"kernel-{kernels}.traceg.xz", lzma.compress(header(kernels), preset=1) + xz_body
            xz_files += 1
        else:
            name, data = f"kernel-{kernels}.traceg", header(kernels) + plain_body
        (directory / name).write_bytes(data)
        written += len(data)
        lines += [f"MemcpyHtoD,0x00007f2b2d{kernels:06x},4096", name]
    (directory / "kernelslist.g").write_text("\n".join(lines) + "\n")
    return kernels, xz_files, written


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def memory_kb(pid: int) -> dict[str, int]:
    fields = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in ("VmRSS", "VmHWM"):
            fields[key] = int(value.split()[0])
    return fields


class Sampler(threading.Thread):
    def __init__(self, pid: int) -> None:
        super().__init__(daemon=True)
        self.pid = pid
        self.peak = 0
        self.stop = threading.Event()

    def run(self) -> None:
        while not self.stop.is_set():
            self.peak = max(self.peak, memory_kb(self.pid)["VmRSS"])
            time.sleep(0.02)


def serve(data_dir: Path, port: int) -> subprocess.Popen[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CASCADE_")}
    env["CASCADE_TOKEN"] = TOKEN
    command = [sys.executable, "-m", "cascade_cli", "serve", "--port", str(port), "--data-dir", str(data_dir)]
    command += ["--no-runner", "--accelsim-dir", str(TREE)]
    proc = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, text=True)
    deadline = time.monotonic() + 60
    while True:
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/api/health", timeout=1).read()
            return proc
        except OSError:
            if proc.poll() is not None or time.monotonic() > deadline:
                raise SystemExit("cascade serve did not start") from None
            time.sleep(0.1)


def file_pieces(path: Path) -> Iterator[bytes]:
    with path.open("rb") as f:
        while chunk := f.read(1 << 20):
            yield chunk


def nats_pid(serve_pid: int) -> int:
    return int(subprocess.run(["pgrep", "-P", str(serve_pid)], capture_output=True, text=True).stdout.split()[0])


def cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size-gb", type=float, default=1.1)
    parser.add_argument("--xz-every", type=int, default=5, help="every n-th kernel file is .traceg.xz")
    parser.add_argument("--work-dir", type=Path, help="default: a temp dir, removed at the end")
    args = parser.parse_args()
    work = args.work_dir or Path(tempfile.mkdtemp(prefix="trace-bench-"))
    try:
        started = time.perf_counter()
        kernels, xz_files, written = make_trace(work / "trace", int(args.size_gb * 1e9), args.xz_every)
        archive = work / "trace.tar"
        subprocess.run(["tar", "-cf", str(archive), "-C", str(work / "trace"), "."], check=True)
        size = archive.stat().st_size
        print(f"trace: {kernels} kernels ({xz_files} .traceg.xz), archive {size / 1e9:.2f} GB, made in {time.perf_counter() - started:.0f}s")
        subprocess.run(["cat", str(archive)], stdout=subprocess.DEVNULL, check=True)  # into the page cache
        subprocess.run(["sync"], check=True)  # each measurement starts with nothing waiting to be written

        port = free_port()
        proc = serve(work / "data", port)
        try:
            before = memory_kb(proc.pid)
            nats = nats_pid(proc.pid)
            cpu_before = cpu_s(proc.pid), cpu_s(nats)
            sampler = Sampler(proc.pid)
            sampler.start()
            client = ApiClient(f"http://127.0.0.1:{port}", TOKEN)
            t0 = time.perf_counter()
            raw = client.send_stream("POST", "/api/traces?id=bench", file_pieces(archive), size, {"Content-Type": "application/x-tar"})
            ingest_s = time.perf_counter() - t0
            cpu = cpu_s(proc.pid) - cpu_before[0], cpu_s(nats) - cpu_before[1]
            trace = json.loads(raw)
            subprocess.run(["sync"], check=True)
            t0 = time.perf_counter()
            env = {k: v for k, v in os.environ.items() if not k.startswith("CASCADE_")} | {"CASCADE_TOKEN": TOKEN}
            command = [sys.executable, "-m", "cascade_cli", "trace", "upload", str(work / "trace"), "--id", "bench-cli"]
            done = subprocess.run([*command, "--url", f"http://127.0.0.1:{port}"], env=env, capture_output=True, text=True)
            cli_s = time.perf_counter() - t0
            sampler.stop.set()
            sampler.join()
            after = memory_kb(proc.pid)
            nats_kb = memory_kb(nats)["VmRSS"]
        finally:
            proc.send_signal(signal.SIGINT)
            proc.wait(60)
        assert trace["state"] == "ready", trace
        assert trace["kernel_count"] == kernels, trace
        assert done.returncode == 0 and f"{kernels} kernels" in done.stdout, done.stderr

        target = work / "untarred"
        target.mkdir()
        subprocess.run(["sync"], check=True)
        t0 = time.perf_counter()
        subprocess.run(["tar", "-xf", str(archive), "-C", str(target)], check=True)
        tar_s = time.perf_counter() - t0
        subprocess.run(["sync"], check=True)
        tar_sync_s = time.perf_counter() - t0

        mb = size / 1e6
        print(f"ingest (POST /api/traces, ready):  {ingest_s:6.1f} s  {mb / ingest_s:7.1f} MB/s")
        print(f"cascade trace upload DIR (CLI):     {cli_s:6.1f} s  {mb / cli_s:7.1f} MB/s")
        print(f"tar -xf of the same archive:        {tar_s:6.1f} s  {mb / tar_s:7.1f} MB/s")
        print(f"tar -xf, then sync:                 {tar_sync_s:6.1f} s  {mb / tar_sync_s:7.1f} MB/s")
        print(f"service RSS: {before['VmRSS'] / 1024:.0f} MB before, peak {sampler.peak / 1024:.0f} MB sampled "
              f"(VmHWM {after['VmHWM'] / 1024:.0f} MB), {after['VmRSS'] / 1024:.0f} MB after")
        print(f"CPU during the ingest: service {cpu[0]:.1f} s, embedded nats-server {cpu[1]:.1f} s (RSS {nats_kb / 1024:.0f} MB)")
        print(f"trace: {trace['state']}, {trace['kernel_count']} kernels, {trace['trace_gpu_arch']}, {trace['bytes']} bytes")
    finally:
        if args.work_dir is None:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
