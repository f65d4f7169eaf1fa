"""Requests name this server in their `Host`, or are refused (400).

A page on another site can make a browser reach the server through a name of its own that
it points at the server's address (DNS rebinding); the browser then sends that name as the
Host, and the routes that need no token (the health check, the web app) would answer it.
The names taken: the address the request came to (the listening socket's, as the ASGI server
says it), and when that is a loopback address, `localhost` and the loopback addresses; the
host serve was told to bind, unless it is every address; and the public names configured
(`CASCADE_ALLOWED_HOSTS`, `--allowed-hosts`), as a proxy in front of serve forwards them.
The port is not compared: a proxy forwards its own, and a rebinding page's name is not one
of these whatever its port.
"""

from __future__ import annotations

import ipaddress

from starlette.types import ASGIApp, Receive, Scope, Send

from cascade_api.models import ErrorDetail
from cascade_app.config import Settings
from cascade_http.responses import MsgspecResponse

LOOPBACK_NAMES = frozenset({"localhost", "127.0.0.1", "::1"})
_SHOWN = 100  # of a Host refused, the characters the detail repeats


def name_of(host: str) -> str:
    """A Host header's name (or an address): its port taken off, an IPv6 address out of its
    brackets, in lower case."""
    if host.startswith("["):
        return host[1:].partition("]")[0].lower()
    if host.count(":") > 1:  # an IPv6 address as a socket gives it, with no port
        return host.lower()
    name, colon, port = host.rpartition(":")
    return (name if colon and port.isdigit() else host).lower()


def _ip(text: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    try:
        ip = ipaddress.ip_address(text)
    except ValueError:
        return None
    return (ip.ipv4_mapped or ip) if isinstance(ip, ipaddress.IPv6Address) else ip


def names(settings: Settings, arrived_at: str | None) -> set[str]:
    """The names a request that came to the address `arrived_at` may give as its Host."""
    taken = set(settings.allowed_host_names)
    bound = _ip(settings.host)
    if bound is None or not bound.is_unspecified:
        taken.add(name_of(settings.host))
    if arrived_at is not None:
        taken.add(name_of(arrived_at))
        local = _ip(arrived_at)
        if local is not None and local.is_loopback:
            taken |= LOOPBACK_NAMES
    return taken


def problem(scope: Scope, settings: Settings) -> str | None:
    """Why the request's Host is not one of this server's names, or None if it is."""
    given = [value.decode("latin-1") for name, value in scope["headers"] if name == b"host"]
    if len(given) != 1:
        return f"{len(given)} Host headers were sent; send exactly one, naming this server"
    server = scope.get("server")
    if name_of(given[0]) in names(settings, None if server is None else str(server[0])):
        return None
    return (
        f"Host {given[0][:_SHOWN]!r} is not a name of this server; if it is one (a proxy's or a DNS name), "
        "start serve with it in --allowed-hosts (CASCADE_ALLOWED_HOSTS)"
    )


class KnownHosts:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and (refused := problem(scope, scope["app"].state.cascade.settings)) is not None:
            await MsgspecResponse(ErrorDetail(refused), status_code=400)(scope, receive, send)
            return
        await self.app(scope, receive, send)
