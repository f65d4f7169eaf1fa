"""`POST /api/sql`: a person's SELECT on the read model (`projections/user_sql.py`)."""

from __future__ import annotations

from datetime import UTC, datetime

import duckdb
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from cascade_app import disk
from cascade_app.reads import read
from cascade_api.models import SqlAnswer, SqlQuery
from cascade_core.refusals import Unanswerable
from cascade_http.bodies import json_body
from cascade_http.openapi import operation
from cascade_http.state import cascade
from projections import answers, sql_process, user_sql
from projections.replay import wal


@operation(
    summary="Query the read model",
    description="Runs one SELECT on the read model's tables and views (README.md, Querying the read model) as of "
    "the last batch the projector committed, and answers in `format`: an SqlAnswer, CSV, an Arrow IPC stream or "
    "Parquet. Nothing else runs: no write, COPY, ATTACH, INSTALL, LOAD, PRAGMA, SET or CALL, no second statement, "
    "and no table function but those that read the read model itself (range, unnest, json_each, duckdb_tables...), "
    "so no file or network is reached, nor any setting read. It runs in a process of its own on a copy of the read "
    "model, with at most CASCADE_SQL_MEMORY_BYTES of memory, CASCADE_SQL_TIMEOUT seconds, CASCADE_SQL_MAX_ROWS rows and "
    "CASCADE_SQL_MAX_BYTES bytes; two queries run at once, others wait their turn.",
    tag="sql",
    body=SqlQuery,
    response=SqlAnswer,
    other_media_types=tuple(t for f, t in answers.MEDIA_TYPES.items() if f != "json"),
    errors={
        400: "The SQL does not parse or bind, or is not one SELECT of the read model alone: `detail` says why.",
        408: "The query ran past CASCADE_SQL_TIMEOUT and was stopped.",
        413: "The body is over CASCADE_MAX_BODY_BYTES.",
        422: "The answer has more rows than CASCADE_SQL_MAX_ROWS or more bytes than CASCADE_SQL_MAX_BYTES, the query "
        "needed more memory than CASCADE_SQL_MEMORY_BYTES, or the body fails validation.",
        507: "The data dir's disk has no room for the copy of the read model the query runs on.",
    },
)
async def run_sql(request: Request) -> Response:
    c = cascade(request)
    query = await json_body(request, SqlQuery)
    settings = c.settings
    limits = user_sql.Limits(seconds=settings.sql_timeout_s, rows=settings.sql_max_rows, bytes=settings.sql_max_bytes)
    try:
        select = await read(c, user_sql.check, query.sql)
    except duckdb.Error as err:  # SQL that does not parse: DuckDB's own words
        raise Unanswerable(str(err).splitlines()[0]) from None
    async with c.sql_queries:
        # Each query runs on a copy of the read model, which must fit beside what the service keeps free.
        copied = sum(f.stat().st_size for f in (c.read_model.db, wal(c.read_model.db)) if f.exists())
        disk.check_room(disk.looked_at(settings.data_dir, c.disk, datetime.now(UTC)), copied)
        body = await sql_process.answer(c.sql_children, c.read_model.db, select, query.format, limits, settings.sql_memory_bytes)
    return Response(body, media_type=answers.MEDIA_TYPES[query.format])


routes = [Route("/api/sql", run_sql, methods=["POST"])]
