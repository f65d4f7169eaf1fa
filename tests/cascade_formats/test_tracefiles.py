from __future__ import annotations

import lzma
import re
from pathlib import Path

import pytest

from cascade_core.events import TraceKernel
from cascade_formats.tracefiles import (
    HEADER_PREFIX_BYTES,
    TRACE_ID_PATTERN,
    KernelHeader,
    KernelLaunch,
    MemcpyHtoD,
    TraceError,
    TraceInfo,
    kernel_files,
    parse_cascade_json,
    parse_kernel_header,
    parse_kernelslist,
    safe_member_path,
    trace_arch,
    trace_kernels,
)

from tests.support import TRACES

HEADER = """\
-kernel name = _Z6vecAddIfEvPT_S1_S1_i
-kernel id = 1
-grid dim = (1,1,1)
-block dim = (1024,1,1)
-shmem = 0
-nregs = 8
-binary version = 61
-cuda stream id = 0
-shmem base_addr = 0x00007f2b5a000000
-local mem base_addr = 0x00007f2b58000000
-nvbit version = 1.5.5
-accelsim tracer version = 4
-enable lineinfo = 0

#traces format = [line_num] PC mask dest_num [reg_dests] opcode src_num [reg_srcs] mem_width
"""


def header_prefix(path: Path) -> str:
    """What the upload pipeline hands parse_kernel_header: a decompressed prefix."""
    data = path.read_bytes()
    if path.name.endswith(".xz"):
        prefix = lzma.LZMADecompressor().decompress(data, max_length=HEADER_PREFIX_BYTES)
    else:
        prefix = data[:HEADER_PREFIX_BYTES]
    return prefix.decode()


def load_trace(name: str) -> tuple[str, list[TraceKernel]]:
    root = TRACES / name
    entries = parse_kernelslist((root / "kernelslist.g").read_text())
    headers = {file: parse_kernel_header(header_prefix(root / file), file) for file in kernel_files(entries)}
    return trace_arch(headers.values()), trace_kernels(entries, headers)


def with_line(header: str, old: str, new: str) -> str:
    assert old in header
    return header.replace(old, new)


# --- real traces ----------------------------------------------------------------------------


def test_vectoradd_trace() -> None:
    arch, kernels = load_trace("vectoradd-100-32")
    assert arch == "sm_61"
    assert kernels == [
        TraceKernel(
            uid=1,
            name="_Z6vecAddIfEvPT_S1_S1_i",
            grid="1x1x1",
            block="1024x1x1",
            shmem=0,
            nregs=8,
            file="kernel-1.traceg",
            cuda_stream_id=0,
        )
    ]


def test_vectoradd_kernelslist_has_memcpys_then_a_kernel() -> None:
    entries = parse_kernelslist((TRACES / "vectoradd-100-32" / "kernelslist.g").read_text())
    assert entries == [
        MemcpyHtoD(1, 0x00007F2B2D500000, 400),
        MemcpyHtoD(2, 0x00007F2B2D500200, 400),
        MemcpyHtoD(3, 0x00007F2B2D500400, 400),
        KernelLaunch(4, 1, "kernel-1.traceg"),
    ]


def test_combo_trace_reads_the_xz_kernel_header() -> None:
    arch, kernels = load_trace("combo-vec-mm-xz")
    assert arch == "sm_61"
    assert [(k.uid, k.name, k.file) for k in kernels] == [
        (1, "_Z6vecAddIfEvPT_S1_S1_i", "kernel-1.traceg"),
        (2, "_Z8mult_gpuIfEvPT_S1_S1_ii", "kernel-2.traceg.xz"),
        (3, "_Z6vecAddIfEvPT_S1_S1_i", "kernel-1.traceg"),
    ]
    matmul = kernels[1]
    assert (matmul.grid, matmul.block, matmul.shmem, matmul.nregs) == ("1x1x1", "32x32x1", 8192, 30)


def test_matrixmul_x40_launches_one_file_forty_times() -> None:
    entries = parse_kernelslist((TRACES / "matrixmul-x40" / "kernelslist.g").read_text())
    assert kernel_files(entries) == ["kernel-1.traceg.xz"]
    arch, kernels = load_trace("matrixmul-x40")
    assert arch == "sm_61"
    assert [k.uid for k in kernels] == list(range(1, 41))
    assert {(k.name, k.file, k.block) for k in kernels} == {
        ("_Z8mult_gpuIfEvPT_S1_S1_ii", "kernel-1.traceg.xz", "32x32x1")
    }


def test_matrixmul_header() -> None:
    header = parse_kernel_header(header_prefix(TRACES / "matrixmul-32-32" / "kernel-1.traceg"), "kernel-1.traceg")
    assert header == KernelHeader(
        file="kernel-1.traceg",
        name="_Z8mult_gpuIfEvPT_S1_S1_ii",
        grid=(1, 1, 1),
        block=(32, 32, 1),
        shmem=8192,
        nregs=30,
        binary_version=61,
        kernel_id=1,
        cuda_stream_id=0,
    )


# --- kernelslist.g --------------------------------------------------------------------------


def test_kernelslist_skips_blank_lines_and_numbers_launches() -> None:
    text = "\nMemcpyHtoD,0x10,4\n\nkernel-1.traceg\n   \nkernel-2.traceg.xz\nkernel-1.traceg\n"
    assert parse_kernelslist(text) == [
        MemcpyHtoD(2, 0x10, 4),
        KernelLaunch(4, 1, "kernel-1.traceg"),
        KernelLaunch(6, 2, "kernel-2.traceg.xz"),
        KernelLaunch(7, 3, "kernel-1.traceg"),
    ]


def test_kernelslist_accepts_kernel_files_in_a_folder_named_kernel() -> None:
    assert parse_kernelslist("kernels/k1.traceg") == [KernelLaunch(1, 1, "kernels/k1.traceg")]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            "kernel-1.traceg\nMemcpyHtoD,0x1,4\n\n\n\n\nfoo.bin\n",
            "kernelslist.g line 7: 'foo.bin' is neither a MemcpyHtoD line nor a .traceg/.traceg.xz kernel file",
        ),
        (
            "MemcpyHtoD,0x00007f2b2d500000\nkernel-1.traceg",
            "kernelslist.g line 1: 'MemcpyHtoD,0x00007f2b2d500000' is not of the form MemcpyHtoD,<hex address>,<bytes>",
        ),
        (
            "MemcpyHtoDx,0x1,4\nkernel-1.traceg",
            "kernelslist.g line 1: 'MemcpyHtoDx,0x1,4' is not of the form MemcpyHtoD,<hex address>,<bytes>",
        ),
        (
            "MemcpyHtoD,0xzz,400\nkernel-1.traceg",
            "kernelslist.g line 1: address '0xzz' is not a hexadecimal number",
        ),
        (
            "kernel-1.traceg\nMemcpyHtoD,0x10,-4",
            "kernelslist.g line 2: byte count '-4' is not a whole number",
        ),
        (
            "../kernel-1.traceg",
            "kernelslist.g line 1: kernel file '../kernel-1.traceg' must be a plain relative path inside the trace "
            "(no '..', '.', leading '/', backslashes, doubled slashes or spaces)",
        ),
        (
            "/srv/traces/kernel-1.traceg",
            "kernelslist.g line 1: kernel file '/srv/traces/kernel-1.traceg' must be a plain relative path inside "
            "the trace (no '..', '.', leading '/', backslashes, doubled slashes or spaces)",
        ),
        (
            "kernels\\kernel-1.traceg",
            "kernelslist.g line 1: kernel file 'kernels\\\\kernel-1.traceg' must be a plain relative path inside "
            "the trace (no '..', '.', leading '/', backslashes, doubled slashes or spaces)",
        ),
        (
            "vecadd.traceg",
            "kernelslist.g line 1: kernel file 'vecadd.traceg' does not start with 'kernel', so Accel-Sim would "
            "skip it; name kernel files like the tracer does (kernel-1.traceg)",
        ),
        (
            "kernel-1.traceg\r\n",
            "kernelslist.g line 1 ends with a carriage return (Windows line endings), which Accel-Sim would read "
            "as part of the file name; save the file with Unix line endings",
        ),
        (
            "MemcpyHtoD,0x10,4\n\n",
            "kernelslist.g names no kernel files (.traceg or .traceg.xz lines)",
        ),
    ],
)
def test_kernelslist_errors(text: str, message: str) -> None:
    with pytest.raises(TraceError) as error:
        parse_kernelslist(text)
    assert str(error.value) == message


# --- kernel headers -------------------------------------------------------------------------


def test_header_stops_at_the_trace_format_comment() -> None:
    body = HEADER + "-grid dim = (9,9,9)\n#BEGIN_TB\nthread block = 0,0,0\n"
    assert parse_kernel_header(body, "kernel-1.traceg").grid == (1, 1, 1)


def test_header_stops_at_the_first_instruction_line() -> None:
    text = HEADER.replace("#traces format", "thread block = 0,0,0\n#traces format")
    assert parse_kernel_header(text, "kernel-1.traceg").binary_version == 61


def test_header_ignores_unknown_keys_and_a_cut_last_line() -> None:
    text = "-future key = whatever\n" + HEADER.split("\n#")[0] + "\n-cuda stream id = 9"
    header = parse_kernel_header(text, "kernel-1.traceg")
    assert header.cuda_stream_id == 0  # the cut line might have read 93...


def test_header_without_optional_keys() -> None:
    text = with_line(HEADER, "-cuda stream id = 0\n", "")
    text = with_line(text, "-kernel id = 1\n", "")
    header = parse_kernel_header(text, "kernel-1.traceg")
    assert (header.kernel_id, header.cuda_stream_id) == (None, None)


def test_repeated_header_key_overrides_as_in_accel_sim() -> None:
    text = with_line(HEADER, "-nregs = 8\n", "-nregs = 8\n-nregs = 16\n")
    assert parse_kernel_header(text, "kernel-1.traceg").nregs == 16


def test_header_in_windows_line_endings() -> None:
    header = parse_kernel_header(HEADER.replace("\n", "\r\n"), "kernel-1.traceg")
    assert header.block == (1024, 1, 1)


@pytest.mark.parametrize(
    ("old", "new", "message"),
    [
        ("-binary version = 61\n", "", "kernel-2.traceg.xz: header has no '-binary version' line"),
        ("-kernel name = _Z6vecAddIfEvPT_S1_S1_i\n", "", "kernel-2.traceg.xz: header has no '-kernel name' line"),
        ("-block dim = (1024,1,1)\n", "", "kernel-2.traceg.xz: header has no '-block dim' line"),
        (
            "-grid dim = (1,1,1)",
            "-grid dim = (1,1)",
            "kernel-2.traceg.xz line 3: '-grid dim' is '(1,1)', expected of the form (x,y,z)",
        ),
        (
            "-binary version = 61",
            "-binary version = sm_61",
            "kernel-2.traceg.xz line 7: '-binary version' is 'sm_61', expected a whole number",
        ),
        (
            "-shmem base_addr = 0x00007f2b5a000000",
            "-shmem base_addr = somewhere",
            "kernel-2.traceg.xz line 9: '-shmem base_addr' is 'somewhere', expected a hexadecimal address",
        ),
        (
            "-nregs = 8",
            "-nregs 8",
            "kernel-2.traceg.xz line 6: header line '-nregs 8' is not of the form -key = value",
        ),
    ],
)
def test_header_errors(old: str, new: str, message: str) -> None:
    with pytest.raises(TraceError) as error:
        parse_kernel_header(with_line(HEADER, old, new), "kernel-2.traceg.xz")
    assert str(error.value) == message


def test_header_prefix_is_enough_for_long_kernel_names() -> None:
    name = "_ZN7cutlass13device_kernel" + "I" * 5000
    text = with_line(HEADER, "_Z6vecAddIfEvPT_S1_S1_i", name) + "0008 ffffffff 1 R1 MOV 0 0\n" * 10000
    prefix = text.encode()[:HEADER_PREFIX_BYTES].decode()
    assert parse_kernel_header(prefix, "kernel-1.traceg").name == name


# --- arch and kernels -----------------------------------------------------------------------


def header(file: str, binary_version: int = 61) -> KernelHeader:
    return KernelHeader(
        file=file, name="k", grid=(2, 1, 1), block=(128, 1, 1), shmem=0, nregs=32, binary_version=binary_version
    )


def test_trace_arch_requires_one_arch() -> None:
    assert trace_arch([header("kernel-1.traceg", 90), header("kernel-2.traceg", 90)]) == "sm_90"
    with pytest.raises(TraceError) as error:
        trace_arch([header("kernel-1.traceg", 61), header("kernel-2.traceg", 61), header("kernel-3.traceg.xz", 70)])
    assert str(error.value) == (
        "kernel-1.traceg is sm_61 but kernel-3.traceg.xz is sm_70; every kernel of a trace must be traced on "
        "the same GPU arch"
    )


def test_trace_arch_of_no_kernels() -> None:
    with pytest.raises(TraceError, match="names no kernel files"):
        trace_arch([])


def test_trace_kernels_reports_a_missing_kernel_file() -> None:
    entries = parse_kernelslist("kernel-1.traceg\nkernel-2.traceg\n")
    with pytest.raises(TraceError) as error:
        trace_kernels(entries, {"kernel-1.traceg": header("kernel-1.traceg")})
    assert str(error.value) == "kernelslist.g line 2 names 'kernel-2.traceg', which is not in the trace"


def test_trace_kernels_without_stream_id() -> None:
    entries = parse_kernelslist("kernel-1.traceg\n")
    [kernel] = trace_kernels(entries, {"kernel-1.traceg": header("kernel-1.traceg")})
    assert kernel == TraceKernel(
        uid=1, name="k", grid="2x1x1", block="128x1x1", shmem=0, nregs=32, file="kernel-1.traceg", cuda_stream_id=None
    )


# --- cascade.json ---------------------------------------------------------------------------


def test_cascade_json() -> None:
    raw = b'{"model": "facebook/opt-125m", "layers": ["attn", 3], "source_gpu": "H100", "notes": {"x": 1}}'
    assert parse_cascade_json(raw) == TraceInfo(model="facebook/opt-125m", layers=["attn", 3], source_gpu="H100")


def test_cascade_json_fields_are_optional() -> None:
    assert parse_cascade_json(b"{}") == TraceInfo()
    assert parse_cascade_json(b'{"model": null, "layers": null}') == TraceInfo()


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        (b'{"model": 5}', "cascade.json: 'model' must be a string, not an integer"),
        (b'{"source_gpu": ["H100"]}', "cascade.json: 'source_gpu' must be a string, not a list"),
        (b'{"layers": "attn"}', "cascade.json: 'layers' must be a list of strings or integers, not a string"),
        (b'{"layers": [1, true]}', "cascade.json: 'layers' item 1 must be a string or an integer, not a boolean"),
        (b'{"layers": [1.5]}', "cascade.json: 'layers' item 0 must be a string or an integer, not a decimal number"),
        (b'{"layers": [1, 9223372036854775808]}', "cascade.json: 'layers' item 1 must be an integer of at most 64 bits"),
        (b"[]", "cascade.json must hold a JSON object, not a list"),
    ],
)
def test_cascade_json_errors(raw: bytes, message: str) -> None:
    with pytest.raises(TraceError) as error:
        parse_cascade_json(raw)
    assert str(error.value) == message


def test_cascade_json_not_json() -> None:
    with pytest.raises(TraceError, match=r"^cascade\.json is not valid JSON: "):
        parse_cascade_json(b"{model: x}")


# --- archive member names and trace ids -----------------------------------------------------


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("kernelslist.g", "kernelslist.g"),
        ("./trace/kernel-1.traceg", "trace/kernel-1.traceg"),
        ("trace//./kernel-1.traceg", "trace/kernel-1.traceg"),
        ("trace/", "trace"),
        ("", None),
        (".", None),
        ("./", None),
        ("/etc/passwd", None),
        ("../x", None),
        ("trace/../../x", None),
        ("trace\\kernel-1.traceg", None),
        ("kernel\x00.traceg", None),
        ("kernel\n.traceg", None),
    ],
)
def test_safe_member_path(name: str, expected: str | None) -> None:
    assert safe_member_path(name) == expected


@pytest.mark.parametrize(
    ("trace_id", "ok"),
    [("demo", True), ("opt-125m_H100.v2", True), ("a" * 64, True), ("a" * 65, False), (".hidden", False),
     ("-x", False), ("a/b", False), ("", False), ("a b", False)],
)
def test_trace_id_pattern(trace_id: str, ok: bool) -> None:
    assert (re.fullmatch(TRACE_ID_PATTERN, trace_id) is not None) is ok
