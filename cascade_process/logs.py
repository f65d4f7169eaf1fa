"""The service's log lines, with the API token and NATS credentials taken out.

Browsers' EventSource sends the token as `?token=` on the run event stream, and uvicorn's
access log writes request paths whole, so every line that Cascade or uvicorn logs (through
the one root handler set up here; uvicorn is started with no logging config of its own)
passes a formatter that replaces the value of any `token=` parameter, right or wrong, and
the credentials of any URL (`nats://user:password@host`), tracebacks included.
"""

from __future__ import annotations

import logging
import re

from cascade_nats.wire import REDACTED, redacted

TOKEN_PARAMETER = re.compile(r"(token=)[^&\s\"'#]*", re.IGNORECASE)
FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


def redact(text: str) -> str:
    return redacted(TOKEN_PARAMETER.sub(rf"\g<1>{REDACTED}", text))


class RedactingFormatter(logging.Formatter):
    """Redacts the whole formatted line: message, arguments, and any traceback."""

    def format(self, record: logging.LogRecord) -> str:
        return redact(super().format(record))


def configure(level: int = logging.INFO) -> None:
    handler = logging.StreamHandler()
    handler.setFormatter(RedactingFormatter(FORMAT))
    logging.basicConfig(level=level, handlers=[handler])
