"""A minimal client of the Cascade API for the command line (no third-party HTTP library)."""

from __future__ import annotations

import urllib.error
import urllib.request
from collections.abc import Iterable

from cascade_http.config import ConfigError


class ApiClient:
    def __init__(self, url: str, token: str | None) -> None:
        self.url = url.rstrip("/")
        self.token = token

    def request(
        self, method: str, path: str, body: bytes | Iterable[bytes] | None = None, headers: dict[str, str] | None = None
    ) -> bytes:
        request = urllib.request.Request(self.url + path, data=body, method=method, headers=dict(headers or {}))  # type: ignore[arg-type]
        if self.token:
            request.add_header("Authorization", f"Bearer {self.token}")
        try:
            with urllib.request.urlopen(request, timeout=600) as response:
                return response.read()  # type: ignore[no-any-return]
        except urllib.error.HTTPError as err:
            raise ConfigError(f"{method} {path}: {err.code} {err.read().decode(errors='replace')}") from err
        except urllib.error.URLError as err:
            raise ConfigError(f"{self.url}: unreachable ({err.reason})") from err

    def post(self, path: str) -> bytes:
        return self.request("POST", path, b"")
