"""Where a CLI command finds the running service and its API token.

The URL: `--url`, else CASCADE_URL, else the default address (CASCADE_HOST, CASCADE_PORT). The
token: CASCADE_TOKEN, else `<data dir>/token`.
"""

from __future__ import annotations

import argparse
import os

from cascade_http.client import ApiClient
from cascade_http.config import resolve


def api_client(args: argparse.Namespace) -> ApiClient:
    settings = resolve({"data_dir": getattr(args, "data_dir", None)})
    url = getattr(args, "url", None) or os.environ.get("CASCADE_URL") or f"http://{settings.host}:{settings.port}"
    token = settings.token
    if token is None and (settings.data_dir / "token").exists():
        token = (settings.data_dir / "token").read_text().strip()
    return ApiClient(url, token)
