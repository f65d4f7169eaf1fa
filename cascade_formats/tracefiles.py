"""The Accel-Sim trace format: `kernelslist.g`, kernel trace headers, and the optional
`cascade.json` that rides along in an upload (`real_timing.csv`, its other companion, is
read by `cascade_formats.realtiming`).

Every function takes text or bytes, never a path, so the upload pipeline can feed it
data as it streams out of an archive. Every error is a `TraceError` whose message names
the file (and line) and says what to change, because it is shown to the uploader as is.

The rules follow what Accel-Sim itself does (`trace_parser.cc`), and are stricter where
the simulator would otherwise skip a line silently or fail long after upload.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping

import msgspec

from cascade_core.events import TraceKernel
from cascade_core.ids import TRACE_ID_PATTERN
from cascade_core.traces import TraceInfo
from cascade_formats import json_depth

__all__ = [
    "HEADER_PREFIX_BYTES",
    "TRACE_ID_PATTERN",
    "KernelHeader",
    "KernelLaunch",
    "KernelsListEntry",
    "MemcpyHtoD",
    "TraceError",
    "TraceInfo",
    "kernel_files",
    "parse_cascade_json",
    "parse_kernel_header",
    "parse_kernelslist",
    "safe_member_path",
    "text_of",
    "trace_arch",
    "trace_kernels",
]

KERNELSLIST = "kernelslist.g"
REAL_TIMING = "real_timing.csv"
CASCADE_JSON = "cascade.json"

# A tracer header is about a dozen short lines; the kernel name is the only long one, and
# even heavily templated names stay far below this. Decompressing this much of a kernel
# file is always enough to read its header.
HEADER_PREFIX_BYTES = 64 * 1024

KERNEL_SUFFIXES = (".traceg", ".traceg.xz")


class TraceError(ValueError):
    """An uploaded trace is unusable; the message tells the user what to fix."""


def text_of(raw: bytes, name: str) -> str:
    """The file `name`'s bytes as UTF-8 text, or a `TraceError` that says where they are not."""
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as error:
        raise TraceError(f"{name} is not UTF-8 text (byte {error.start} is 0x{raw[error.start]:02x}); save it as UTF-8") from None


class MemcpyHtoD(msgspec.Struct, frozen=True):
    line: int
    address: int
    bytes: int


class KernelLaunch(msgspec.Struct, frozen=True):
    line: int
    uid: int
    file: str


KernelsListEntry = MemcpyHtoD | KernelLaunch


class KernelHeader(msgspec.Struct, frozen=True, kw_only=True):
    file: str
    name: str
    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    shmem: int
    nregs: int
    binary_version: int
    kernel_id: int | None = None
    cuda_stream_id: int | None = None



# --- archive member names -------------------------------------------------------------------


def safe_member_path(name: str) -> str | None:
    """`name` as a clean relative path (`./a//b/` -> `a/b`), or None if it could escape the
    trace directory or is not portable: absolute, `..`, backslashes, control characters."""
    if not name or name.startswith("/") or "\\" in name:
        return None
    if any(ord(ch) < 0x20 or ord(ch) == 0x7F for ch in name):
        return None
    parts = [part for part in name.split("/") if part not in ("", ".")]
    if not parts or ".." in parts:
        return None
    return "/".join(parts)


# --- kernelslist.g ------------------------------------------------------------------------


_HEX = re.compile(r"(?:0[xX])?[0-9a-fA-F]+")
_DECIMAL = re.compile(r"[0-9]+")


def parse_kernelslist(text: str) -> list[KernelsListEntry]:
    """The commands of `kernelslist.g` in order. A kernel's launch uid is its 1-based
    position among the kernel lines, which is how Accel-Sim numbers `kernel_launch_uid`."""
    entries: list[KernelsListEntry] = []
    uid = 0
    for number, line in enumerate(text.split("\n"), start=1):
        where = f"{KERNELSLIST} line {number}"
        if line.endswith("\r"):
            raise TraceError(
                f"{where} ends with a carriage return (Windows line endings), which Accel-Sim "
                "would read as part of the file name; save the file with Unix line endings"
            )
        if not line.strip():
            continue
        if line.startswith("MemcpyHtoD"):
            entries.append(_memcpy(line, number, where))
        elif line.endswith(KERNEL_SUFFIXES):
            uid += 1
            entries.append(KernelLaunch(number, uid, _kernel_file(line, where)))
        else:
            raise TraceError(
                f"{where}: {line!r} is neither a MemcpyHtoD line nor a .traceg/.traceg.xz kernel file"
            )
    if uid == 0:
        raise TraceError(f"{KERNELSLIST} names no kernel files (.traceg or .traceg.xz lines)")
    return entries


def _memcpy(line: str, number: int, where: str) -> MemcpyHtoD:
    fields = line.split(",")
    if len(fields) != 3 or fields[0] != "MemcpyHtoD":
        raise TraceError(f"{where}: {line!r} is not of the form MemcpyHtoD,<hex address>,<bytes>")
    if not _HEX.fullmatch(fields[1]):
        raise TraceError(f"{where}: address {fields[1]!r} is not a hexadecimal number")
    if not _DECIMAL.fullmatch(fields[2]):
        raise TraceError(f"{where}: byte count {fields[2]!r} is not a whole number")
    return MemcpyHtoD(number, int(fields[1], 16), int(fields[2]))


def _kernel_file(line: str, where: str) -> str:
    if safe_member_path(line) != line or any(ch.isspace() for ch in line):
        raise TraceError(
            f"{where}: kernel file {line!r} must be a plain relative path inside the trace "
            "(no '..', '.', leading '/', backslashes, doubled slashes or spaces)"
        )
    # Accel-Sim only treats lines starting with "kernel" as launches and skips any other
    # line without a word, so such a kernel would silently never run.
    if not line.startswith("kernel"):
        raise TraceError(
            f"{where}: kernel file {line!r} does not start with 'kernel', so Accel-Sim would "
            "skip it; name kernel files like the tracer does (kernel-1.traceg)"
        )
    return line


def kernel_files(entries: Iterable[KernelsListEntry]) -> list[str]:
    """Each kernel file named in `kernelslist.g`, once, in order of first launch: the
    files whose headers have to be read."""
    return list(dict.fromkeys(e.file for e in entries if isinstance(e, KernelLaunch)))


# --- kernel trace headers -----------------------------------------------------------------


_HEADER_LINE = re.compile(r"-([A-Za-z][A-Za-z_ ]*?) *= ?(.*)")
_DIM = re.compile(r"\( *([0-9]+) *, *([0-9]+) *, *([0-9]+) *\)")


def _dim(value: str) -> tuple[int, int, int] | None:
    match = _DIM.fullmatch(value.strip())
    if match is None:
        return None
    x, y, z = (int(g) for g in match.groups())
    return (x, y, z)


def _int(value: str) -> int | None:
    value = value.strip()
    return int(value) if _DECIMAL.fullmatch(value) else None


def _hex(value: str) -> int | None:
    value = value.strip()
    return int(value, 16) if _HEX.fullmatch(value) else None


def _text(value: str) -> str | None:
    return value.strip() or None


class _HeaderKey(msgspec.Struct, frozen=True):
    convert: Callable[[str], object]
    expected: str
    field: str | None  # the KernelHeader field it fills, if Cascade keeps it


# The keys Accel-Sim reads, with how each value must look. Other `-key = value` lines are
# accepted and ignored, as the simulator does, so newer tracers keep working.
_HEADER_KEYS = {
    "kernel name": _HeaderKey(_text, "a kernel name", "name"),
    "kernel id": _HeaderKey(_int, "a whole number", "kernel_id"),
    "grid dim": _HeaderKey(_dim, "of the form (x,y,z)", "grid"),
    "block dim": _HeaderKey(_dim, "of the form (x,y,z)", "block"),
    "shmem": _HeaderKey(_int, "a whole number", "shmem"),
    "nregs": _HeaderKey(_int, "a whole number", "nregs"),
    "binary version": _HeaderKey(_int, "a whole number", "binary_version"),
    "cuda stream id": _HeaderKey(_int, "a whole number", "cuda_stream_id"),
    "shmem base_addr": _HeaderKey(_hex, "a hexadecimal address", None),
    "local mem base_addr": _HeaderKey(_hex, "a hexadecimal address", None),
    "nvbit version": _HeaderKey(_text, "a version", None),
    "accelsim tracer version": _HeaderKey(_int, "a whole number", None),
    "enable lineinfo": _HeaderKey(_int, "a whole number", None),
}
_REQUIRED_KEYS = ("kernel name", "grid dim", "block dim", "shmem", "nregs", "binary version")


def _header_lines(text: str) -> Iterable[tuple[int, str]]:
    """Numbered header lines, up to the first line that is neither blank nor `-key = value`
    (`#traces format = ...` in real files). `text` is a prefix of the file, so a last line
    without its newline may be cut short and is not trusted."""
    lines = text.split("\n")
    if not text.endswith("\n"):
        lines.pop()
    for number, line in enumerate(lines, start=1):
        line = line.rstrip("\r")
        if not line.strip():
            continue
        if not line.startswith("-"):
            return
        yield number, line


def parse_kernel_header(text: str, file: str) -> KernelHeader:
    """The header of the kernel trace `file`, from the first `HEADER_PREFIX_BYTES` (or
    fewer) of its decompressed text."""
    fields: dict[str, object] = {"file": file}
    for number, line in _header_lines(text):
        match = _HEADER_LINE.fullmatch(line)
        if match is None:
            raise TraceError(f"{file} line {number}: header line {line!r} is not of the form -key = value")
        key, raw = match.groups()
        spec = _HEADER_KEYS.get(key)
        if spec is None:
            continue
        value = spec.convert(raw)
        if value is None:
            raise TraceError(f"{file} line {number}: '-{key}' is {raw.strip()!r}, expected {spec.expected}")
        if spec.field is not None:
            # A repeated key overrides the earlier one, as in Accel-Sim.
            fields[spec.field] = value
    for key in _REQUIRED_KEYS:
        if _HEADER_KEYS[key].field not in fields:
            raise TraceError(f"{file}: header has no '-{key}' line")
    return msgspec.convert(fields, KernelHeader)


def _arch(header: KernelHeader) -> str:
    return f"sm_{header.binary_version}"


def trace_arch(headers: Iterable[KernelHeader]) -> str:
    """The trace's GPU arch, `sm_<binary version>`, which every kernel has to share:
    a run simulates all of them on one config."""
    first: KernelHeader | None = None
    for header in headers:
        if first is None:
            first = header
        elif header.binary_version != first.binary_version:
            raise TraceError(
                f"{first.file} is {_arch(first)} but {header.file} is {_arch(header)}; "
                "every kernel of a trace must be traced on the same GPU arch"
            )
    if first is None:
        raise TraceError(f"{KERNELSLIST} names no kernel files (.traceg or .traceg.xz lines)")
    return _arch(first)


def _dims(dim: tuple[int, int, int]) -> str:
    return "x".join(str(n) for n in dim)


def trace_kernels(entries: Iterable[KernelsListEntry], headers: Mapping[str, KernelHeader]) -> list[TraceKernel]:
    """One TraceKernel per launch in `kernelslist.g` order; `headers` maps each kernel file
    (see `kernel_files`) to its header."""
    kernels: list[TraceKernel] = []
    for entry in entries:
        if not isinstance(entry, KernelLaunch):
            continue
        header = headers.get(entry.file)
        if header is None:
            raise TraceError(f"{KERNELSLIST} line {entry.line} names {entry.file!r}, which is not in the trace")
        kernels.append(
            TraceKernel(
                uid=entry.uid,
                name=header.name,
                grid=_dims(header.grid),
                block=_dims(header.block),
                shmem=header.shmem,
                nregs=header.nregs,
                file=entry.file,
                cuda_stream_id=header.cuda_stream_id,
            )
        )
    return kernels


# --- cascade.json -------------------------------------------------------------------------


# What the trace's ready event carries of it, well under an event's limit (cascade_nats.store).
MAX_INFO_BYTES = 64 * 1024


def _optional_str(doc: dict[str, object], field: str) -> str | None:
    value = doc.get(field)
    if value is None or isinstance(value, str):
        return value
    raise TraceError(f"{CASCADE_JSON}: '{field}' must be a string, not {_json_type(value)}")


def _json_type(value: object) -> str:
    names = {bool: "a boolean", int: "an integer", float: "a decimal number", str: "a string", list: "a list", dict: "an object"}
    return names.get(type(value), "null")


def parse_cascade_json(raw: bytes) -> TraceInfo:
    """What the uploader says about the trace: `model`, `layers` and `source_gpu`, each
    optional. Other keys are ignored so the file can carry notes of its own."""
    try:
        doc = json_depth.decode(raw, object)
    except msgspec.DecodeError as error:
        raise TraceError(f"{CASCADE_JSON} is not valid JSON: {error}") from None
    except json_depth.TooDeep as error:
        raise TraceError(f"{CASCADE_JSON}: {error}") from None
    if not isinstance(doc, dict):
        raise TraceError(f"{CASCADE_JSON} must hold a JSON object, not {_json_type(doc)}")
    layers = doc.get("layers")
    if layers is None:
        layers = []
    if not isinstance(layers, list):
        raise TraceError(f"{CASCADE_JSON}: 'layers' must be a list of strings or integers, not {_json_type(layers)}")
    for index, layer in enumerate(layers):
        if isinstance(layer, bool) or not isinstance(layer, (str, int)):
            raise TraceError(
                f"{CASCADE_JSON}: 'layers' item {index} must be a string or an integer, not {_json_type(layer)}"
            )
        if isinstance(layer, int) and not -(2**63) <= layer < 2**63:  # the read model holds it as a BIGINT
            raise TraceError(f"{CASCADE_JSON}: 'layers' item {index} must be an integer of at most 64 bits")
    info = TraceInfo(
        model=_optional_str(doc, "model"),
        layers=layers,
        source_gpu=_optional_str(doc, "source_gpu"),
    )
    size = len(msgspec.json.encode(info))
    if size > MAX_INFO_BYTES:
        raise TraceError(
            f"{CASCADE_JSON}: 'model', 'layers' and 'source_gpu' come to {size:,} bytes, more than the {MAX_INFO_BYTES:,} "
            "Cascade keeps of them"
        )
    return info
