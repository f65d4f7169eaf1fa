"""`cascade sql` and `cascade export`: the read model for people and their tools, through the
API (`POST /api/sql`, `GET /api/runs/{id}/export`), so that they read the live read model
beside the projector rather than open its file."""

from __future__ import annotations

import argparse
import shutil
import sys
import zipfile
from pathlib import Path
from typing import Any, cast

import msgspec

from cascade_api.models import SqlAnswer, SqlFormat, SqlQuery
from cascade_app.config import ConfigError
from cascade_cli import runs_text
from cascade_cli.locate import api_client
from cascade_cli.runs_cli import print_json, quoted_id

FORMATS = ("table", "csv", "json", "parquet")
NULL = "NULL"


def sql(args: argparse.Namespace) -> int:
    form = cast(SqlFormat, "json" if args.format == "table" else args.format)
    if form == "parquet" and args.output is None and sys.stdout.isatty():
        raise ConfigError("Parquet is binary: write it to a file with -o FILE, or pipe it to a program that reads it")
    body = msgspec.json.encode(SqlQuery(sql=args.query, format=form))
    answer = api_client(args).post("/api/sql", body, {"Content-Type": "application/json"})
    if args.format == "table":
        answer = ("\n".join(table_text(msgspec.json.decode(answer, type=SqlAnswer))) + "\n").encode()
    if args.output is None:
        if args.format == "json":
            print_json(answer)  # with the newline a terminal wants
        else:
            _stdout(answer)
        return 0
    try:
        Path(args.output).write_bytes(answer)
    except OSError as err:
        raise ConfigError(f"{args.output}: {err.strerror or err}") from err
    print(f"{args.output}  {len(answer):,} bytes", file=sys.stderr)
    return 0


def _stdout(data: bytes) -> None:
    sys.stdout.flush()
    sys.stdout.buffer.write(data)
    sys.stdout.buffer.flush()


def table_text(answer: SqlAnswer) -> list[str]:
    """Aligned columns, numbers to the right, and how many rows."""
    header = [c.name for c in answer.columns]
    rows = [[_cell(v) for v in row] for row in answer.rows]
    numeric = frozenset(
        i for i in range(len(header)) if answer.rows and all(isinstance(row[i], (int, float)) or row[i] is None for row in answer.rows)
    )
    count = f"({len(rows):,} row{'' if len(rows) == 1 else 's'})"
    return [*runs_text.table(header, rows, numeric), count]


def _cell(value: Any) -> str:
    if value is None:
        return NULL
    if isinstance(value, str):
        return value
    return msgspec.json.encode(value).decode()


def export(args: argparse.Namespace) -> int:
    """Download the run's Parquet files and unpack them: DIR/runs.parquet, sims.parquet,
    kernels.parquet, kernel_stats.parquet, timing.parquet."""
    out = Path(args.output or args.run_id)
    archive = out / f".{out.name}-parquet.zip"
    try:
        out.mkdir(parents=True, exist_ok=True)
        api_client(args).download(f"/api/runs/{quoted_id(args.run_id)}/export", archive)
        sizes = _unpack(archive, out)
    except OSError as err:
        raise ConfigError(f"{out}: {err.strerror or err}") from err
    finally:
        archive.unlink(missing_ok=True)
    for name, size in sizes.items():
        print(f"{out / name}  {size:,} bytes")
    return 0


def _unpack(archive: Path, out: Path) -> dict[str, int]:
    from projections.export import TABLES  # here: it loads DuckDB, which other commands do without

    expected = {f"{table}.parquet" for table in TABLES}
    try:
        with zipfile.ZipFile(archive) as files:
            members = [m for m in files.infolist() if m.filename in expected]
            if {m.filename for m in members} != expected:
                raise ConfigError(f"the server's export holds {sorted(files.namelist())}, not {sorted(expected)}")
            for member in members:
                partial = out / f".{member.filename}.part"
                with files.open(member) as source, partial.open("wb") as target:
                    shutil.copyfileobj(source, target, 1 << 20)
                partial.replace(out / member.filename)
    except zipfile.BadZipFile as err:
        raise ConfigError(f"the server's export is not a zip: {err}") from err
    return {m.filename: m.file_size for m in members}
