"""Launch digests of kernel files on a runner's disk: a file read as the simulator reads it
(`.xz` decompressed), a piece at a time, once; a file that cannot be read has none."""

from __future__ import annotations

import lzma
from pathlib import Path

import pytest

from cascade_core import reuse
from cascade_sim import launch_digests
from cascade_sim.launch_digests import LaunchDigests
from tests.support import TRACES

MATMUL = (TRACES / "matrixmul-32-32" / "kernel-1.traceg").read_bytes()


def test_a_file_stored_plain_or_xz_has_its_contents_launch_digest_read_in_pieces(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(launch_digests, "PIECE", 4096)  # many pieces, the header's in the first
    (tmp_path / "kernel-1.traceg").write_bytes(MATMUL)
    (tmp_path / "kernel-2.traceg.xz").write_bytes(lzma.compress(MATMUL.replace(b"-kernel id = 1\n", b"-kernel id = 2\n")))
    (tmp_path / "kernel-3.traceg.xz").write_bytes(lzma.compress(MATMUL)[:-40])  # cut short
    (tmp_path / "kernel-4.traceg").write_bytes(MATMUL.replace(b"-nregs = 30", b"-nregs = 31"))
    digests = LaunchDigests().of(tmp_path, ["kernel-1.traceg", "kernel-2.traceg.xz", "kernel-3.traceg.xz", "kernel-4.traceg", "kernel-5.traceg"])
    assert digests["kernel-1.traceg"] == digests["kernel-2.traceg.xz"] == reuse.launch_digest([MATMUL])
    assert digests["kernel-4.traceg"] != digests["kernel-1.traceg"]
    assert set(digests) == {"kernel-1.traceg", "kernel-2.traceg.xz", "kernel-4.traceg"}  # 3 is damaged, 5 missing


def test_a_file_is_read_once(tmp_path: Path) -> None:
    (tmp_path / "kernel-1.traceg").write_bytes(MATMUL)
    known = LaunchDigests()
    first = known.of(tmp_path, ["kernel-1.traceg", "kernel-1.traceg"])
    (tmp_path / "kernel-1.traceg").unlink()  # a trace's cached files never change: what was read stands
    assert known.of(tmp_path, ["kernel-1.traceg"]) == first == {"kernel-1.traceg": reuse.launch_digest([MATMUL])}
