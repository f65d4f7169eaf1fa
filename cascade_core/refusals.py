"""Why a command or a read cannot be carried out, as types: the core says what went wrong,
and each edge says it its own way (`cascade_http.responses.STATUSES` as an HTTP status).
The message is the text the one refused reads (the API's `detail`)."""

from __future__ import annotations


class Refused(Exception):
    def __init__(self, detail: str) -> None:
        super().__init__(detail)
        self.detail = detail


class NotFound(Refused):
    """What it names does not exist (or was deleted)."""


class Conflict(Refused):
    """What it names is not in a state that allows it: taken, in use, a sample, not ready."""


class Unanswerable(Refused):
    """What it was asked cannot be answered as asked: a query that does not parse, or is not
    one that is run here."""


class TimedOut(Refused):
    """It ran past its time limit and was stopped; the detail names the setting."""


class Invalid(Refused):
    """What it was given is wrong: an id, a file, an entry, more than one request may ask for."""


class TooLarge(Refused):
    """What it was given is over a size limit; the detail names the setting."""


class UnsupportedMedia(Refused):
    """What it was given is not a kind of content it takes."""


class NoSpace(Refused):
    """It needs room to store what it was given that the disk does not have now."""


class Unavailable(Refused):
    """It cannot be answered now; asking again after `retry_after_s` may succeed."""

    def __init__(self, detail: str, *, retry_after_s: int) -> None:
        super().__init__(detail)
        self.retry_after_s = retry_after_s
