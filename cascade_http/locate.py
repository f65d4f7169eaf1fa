"""Where a CLI command finds the running service and its API token.

The URL: `--url`, else CASCADE_URL, else the one the data dir's `service.json` records, else
the default address. The token: CASCADE_TOKEN, else `<data dir>/token`.
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path

from cascade_http.client import ApiClient
from cascade_http.config import resolve


def api_client(args: argparse.Namespace) -> ApiClient:
    settings = resolve({"data_dir": getattr(args, "data_dir", None)})
    url = getattr(args, "url", None) or os.environ.get("CASCADE_URL") or _service_url(settings.data_dir)
    token = settings.token or _stored_token(settings.data_dir)
    return ApiClient(url or f"http://{settings.host}:{settings.port}", token)


def _service_url(data_dir: Path) -> str | None:
    try:
        url = json.loads((data_dir / "service.json").read_text()).get("url")
    except (OSError, ValueError, AttributeError):
        return None
    return url if isinstance(url, str) else None


def _stored_token(data_dir: Path) -> str | None:
    try:
        return (data_dir / "token").read_text().strip() or None
    except OSError:
        return None
