"""The query parameters of answers that page (`offset`, `limit`) or choose a form (`stats`,
`format`), read strictly: a value out of range or misspelt is a 422 with a detail, as any
query parameter's is here (400 is for a body that does not parse), never a
default answer that looks like the one asked for. A page tells its total in `X-Total-Count`
and the next page's URL in `Link`."""

from __future__ import annotations

import re
from typing import cast, get_args

from starlette.requests import Request

from cascade_http.openapi import Query
from cascade_http.responses import ApiError
from projections.queries.runs import Page, StatsChoice

LIMIT_MAX = 10000
_WHOLE_NUMBER = re.compile(r"[0-9]+")
# Past any run's kernels, and within SQL's integers: a longer number counts as this.
_BEYOND = 10**18
STATS_CHOICES: tuple[str, ...] = get_args(StatsChoice)

PAGE_QUERY = {
    "offset": Query(description="Leave out this many kernels first, in the answer's order. Default 0.", schema={"type": "integer", "minimum": 0}),
    "limit": Query(
        description=f"At most this many kernels (1 to {LIMIT_MAX}). With offset or limit, the answer says the total in "
        'X-Total-Count, and the next page\'s URL in Link (rel="next") when there is one. Default: every one.',
        schema={"type": "integer", "minimum": 1, "maximum": LIMIT_MAX},
    ),
}
PAGE_ERROR = f"offset is not a whole number, limit is not one from 1 to {LIMIT_MAX}, or either is given twice."


def _once(request: Request, name: str) -> str | None:
    values = request.query_params.getlist(name)
    if len(values) > 1:
        raise ApiError(422, f"{name} is given {len(values)} times: give it once")
    return values[0] if values else None


def whole_number(request: Request, name: str, least: int, most: int | None) -> int | None:
    text = _once(request, name)
    if text is None:
        return None
    value = (int(text) if len(text) < len(str(_BEYOND)) else _BEYOND) if _WHOLE_NUMBER.fullmatch(text) else None
    if value is None or value < least or (most is not None and value > most):
        upto = f" to {most}" if most is not None else " or more"
        raise ApiError(422, f"{name} must be a whole number from {least}{upto}, not {text!r}")
    return value


def page_asked(request: Request) -> Page | None:
    """The page the query asks for, or None when it asks for no page (the whole answer, as ever)."""
    offset = whole_number(request, "offset", 0, None)
    limit = whole_number(request, "limit", 1, LIMIT_MAX)
    if offset is None and limit is None:
        return None
    return Page(offset=offset or 0, limit=limit)


def page_headers(request: Request, page: Page, total: int) -> dict[str, str]:
    """The total, and where the next page is if there are kernels past this one."""
    headers = {"X-Total-Count": str(total)}
    if page.limit is not None and page.offset + page.limit < total:
        after = request.url.include_query_params(offset=page.offset + page.limit, limit=page.limit)
        headers["Link"] = f'<{after}>; rel="next"'
    return headers


def choice(request: Request, name: str, choices: tuple[str, ...], default: str) -> str:
    """The query's `name`, one of `choices`; `default` when it is not given."""
    text = _once(request, name)
    if text is None:
        return default
    if text not in choices:
        raise ApiError(422, f"{name} must be one of {', '.join(choices)}, not {text!r}")
    return text


STATS_QUERY = Query(
    description="Which of each kernel's stats its map holds: `all` (the default), `headline` (those the runs and compare "
    "views show: gpu_sim_cycle, gpu_sim_insn, gpu_ipc and the running totals gpu_tot_sim_cycle, gpu_tot_sim_insn, "
    "gpu_tot_ipc) or `none` (maps empty).",
    schema={"type": "string", "enum": list(STATS_CHOICES)},
)


def stats_asked(request: Request) -> StatsChoice:
    return cast(StatsChoice, choice(request, "stats", STATS_CHOICES, "all"))
