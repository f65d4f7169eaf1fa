"""Browser sessions and one-time sign-in codes, kept in this process's memory.

A session is a random id a browser holds in an HttpOnly cookie after it showed the token
once (`POST /api/session`): the cookie is not the token, so a leaked cookie ends with its
session and leaks nothing that signs in again. A sign-in code is a random word `serve`
prints in a link, traded once, within its lifetime, for a session. Both live in memory only:
a restarted server has none, and every browser signs in again (with the token, or the new
link the restarted server prints).
"""

from __future__ import annotations

import hmac
import secrets
import time
from collections.abc import Callable

SESSION_S = 30 * 24 * 3600  # a browser stays signed in this long without signing in again
CODE_S = 15 * 60  # long enough to open the link serve printed, short for one left in a log


class CodeRefused(Exception):
    """A sign-in code that signs nobody in, saying why."""


class Sessions:
    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._sessions: dict[str, float] = {}  # id -> when it ends, by the clock
        self._codes: dict[str, float] = {}  # code -> when it expires; a used one is kept, to say so
        self._used: set[str] = set()

    def open(self) -> str:
        """A new session's id."""
        now = self._clock()
        self._sessions = {sid: end for sid, end in self._sessions.items() if end > now}
        sid = secrets.token_urlsafe(32)
        self._sessions[sid] = now + SESSION_S
        return sid

    def valid(self, sid: str) -> bool:
        end = self._sessions.get(sid)
        return end is not None and end > self._clock()

    def close(self, sid: str) -> None:
        self._sessions.pop(sid, None)

    def new_code(self) -> str:
        code = secrets.token_urlsafe(24)
        self._codes[code] = self._clock() + CODE_S
        return code

    def trade(self, code: str) -> str:
        """A new session's id for a valid unused code, which is then used up."""
        # Compared in constant time, as the token is: a code is a secret while it lasts.
        known = next((c for c in self._codes if hmac.compare_digest(c.encode(), code.encode())), None)
        if known is None:
            raise CodeRefused("This sign-in link is not one this server printed (or it restarted since): sign in with the API token")
        if known in self._used:
            raise CodeRefused("This sign-in link was used already; a link signs in once: sign in with the API token")
        if self._codes[known] <= self._clock():
            raise CodeRefused(f"This sign-in link expired ({CODE_S // 60} minutes after serve printed it): sign in with the API token")
        self._used.add(known)
        return self.open()
