"""Where a NATS server or cluster is and how to log in there, for nats-py and for the Wires
beside it alike.

`--nats-url` takes several URLs, comma-separated, as nats-py and the NATS CLI do; a URL may
carry a user and password (`nats://user:pass@host:port`) or a token (`nats://token@host`).
They are taken out of the URLs here and given to nats-py as options: nats-py logs in to a
server it discovered from the cluster (`connect_urls`) only with options, never with what
another URL carried. TLS (a CA file, a client certificate and key, `tls://` URLs), an nkey
seed file and a `.creds` file (a user JWT and its seed) are settings of their own.

nats-py reads credentials files when it connects; the Wire's handshake does the same with
`login`, signing the server's nonce with the nkey as nats-py does (ed25519, base64).
"""

from __future__ import annotations

import base64
import ipaddress
import re
import ssl
from pathlib import Path
from typing import Any
from urllib.parse import ParseResult, SplitResult, urlsplit

import msgspec

from cascade_nats.wire import redacted

SCHEMES = ("nats", "tls")
DEFAULT_PORT = 4222
# -----BEGIN NATS USER JWT----- and the JWT on the next line; the seed likewise
_CREDS_JWT = re.compile(r"BEGIN NATS USER JWT-*\s*\n\s*(\S+)")
_CREDS_SEED = re.compile(r"BEGIN USER NKEY SEED-*\s*\n\s*(\S+)")


class AccessError(ValueError):
    """A NATS URL or credential that cannot work; the message says which and why."""


class Access(msgspec.Struct, frozen=True, kw_only=True):
    servers: tuple[str, ...]  # scheme://host:port, no credentials
    user: str | None = None
    password: str | None = None
    token: str | None = None
    ca_file: Path | None = None
    cert_file: Path | None = None
    key_file: Path | None = None
    nkey_file: Path | None = None  # an nkey seed (`SU...`)
    creds_file: Path | None = None  # a user JWT and its seed, as `nsc` writes them

    @property
    def address(self) -> str:
        """Where it is, without credentials: for messages and the service file."""
        return ",".join(self.servers)

    @property
    def tls(self) -> bool:
        return any(urlsplit(s).scheme == "tls" for s in self.servers) or any(
            f is not None for f in (self.ca_file, self.cert_file, self.key_file)
        )

    def tls_context(self) -> ssl.SSLContext | None:
        """The TLS settings as one context (None without TLS): verifying the server against
        the CA file (else the system's CAs), presenting the client certificate if given."""
        if not self.tls:
            return None
        try:
            context = ssl.create_default_context(cafile=str(self.ca_file) if self.ca_file else None)
            if self.cert_file is not None:
                context.load_cert_chain(str(self.cert_file), str(self.key_file) if self.key_file else None)
        except (OSError, ssl.SSLError) as err:
            raise AccessError(f"NATS TLS: {getattr(err, 'strerror', None) or err}") from err
        return context

    def tls_name(self, host: str) -> str:
        """The name a server at `host` must prove: its own, unless it is an address that the
        cluster told us of (`connect_urls`), where it is the name of a server we were given."""
        if not _is_ip(host):
            return host
        named = [h for h in (urlsplit(s).hostname for s in self.servers) if h and not _is_ip(h)]
        return named[0] if named else host

    def connect_options(self) -> dict[str, Any]:
        """nats-py's `connect` keywords for logging in here (the reconnect policy is the caller's)."""
        options: dict[str, Any] = {"servers": list(self.servers), "user": self.user, "password": self.password, "token": self.token}
        if (context := self.tls_context()) is not None:
            options["tls"] = context
        if self.creds_file is not None:
            options["user_credentials"] = str(self.creds_file)
        elif self.nkey_file is not None:
            options["nkeys_seed"] = str(self.nkey_file)
        return options

    def login(self, info: dict[str, Any]) -> dict[str, str]:
        """The CONNECT fields that log in to the server whose INFO is `info`, as nats-py's."""
        nonce = info.get("nonce")
        if nonce and (self.creds_file is not None or self.nkey_file is not None):
            fields: dict[str, str] = {}
            if self.creds_file is not None:
                text = _read(self.creds_file, "creds file")
                fields["jwt"] = _part(_CREDS_JWT, text, self.creds_file, "a user JWT")
                seed = _part(_CREDS_SEED, text, self.creds_file, "a user nkey seed")
            else:
                assert self.nkey_file is not None
                seed = _read(self.nkey_file, "nkey seed file").strip()
            public, signature = _sign(seed, nonce.encode())
            fields["sig"] = signature
            if self.creds_file is None:
                fields["nkey"] = public
            return fields
        if self.user is not None and self.password is not None:
            return {"user": self.user, "pass": self.password}
        if self.token is not None:
            return {"auth_token": self.token}
        return {}


def parse(urls: str, **files: Path | None) -> Access:
    """The servers and login of a `--nats-url` (comma-separated URLs), with the TLS and
    credential files given (`Access`'s `*_file` fields)."""
    servers: list[str] = []
    logins: set[tuple[str | None, str | None]] = set()
    for given in (u.strip() for u in urls.split(",")):
        if not given:
            continue
        parts = _split(given)
        servers.append(server_of(parts))
        if parts.username is not None:
            logins.add((parts.username, parts.password))
    if not servers:
        raise AccessError(f"NATS URL {redacted(urls)!r}: no server in it")
    if len(logins) > 1:
        raise AccessError(f"NATS URL {redacted(urls)}: its URLs log in differently; one user or token serves the whole cluster")
    user, password = logins.pop() if logins else (None, None)
    token = None
    if user is not None and password is None:
        user, token = None, user
    if len({urlsplit(s).scheme for s in servers}) > 1:
        raise AccessError(f"NATS URL {redacted(urls)}: mixes nats:// and tls://")
    return Access(servers=tuple(servers), user=user, password=password, token=token, **files)


def _split(url: str) -> SplitResult:
    parts = urlsplit(url if "://" in url else f"nats://{url}")
    try:
        parts.port  # noqa: B018 - raises on a port that is no number
    except ValueError as err:
        raise AccessError(f"NATS URL {redacted(url)}: {err}") from err
    if parts.scheme not in SCHEMES:
        raise AccessError(f"NATS URL {redacted(url)}: {parts.scheme}:// is not nats:// or tls://")
    if not parts.hostname:
        raise AccessError(f"NATS URL {redacted(url)}: no host")
    return parts


def server_of(url: SplitResult | ParseResult) -> str:
    """`scheme://host:port` of a parsed URL, without what logs in there."""
    host = url.hostname or ""
    return f"{url.scheme}://{f'[{host}]' if ':' in host else host}:{url.port or DEFAULT_PORT}"


def _is_ip(host: str) -> bool:
    try:
        ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        return False
    return True


def _read(path: Path, what: str) -> str:
    try:
        return path.read_text()
    except OSError as err:
        raise AccessError(f"NATS {what} {path}: {err.strerror or err}") from err


def _part(pattern: re.Pattern[str], text: str, path: Path, what: str) -> str:
    found = pattern.search(text)
    if found is None:
        raise AccessError(f"NATS creds file {path}: no {what} in it")
    return found[1]


def _sign(seed: str, nonce: bytes) -> tuple[str, str]:
    """The public key of an nkey seed, and its signature of `nonce` (base64)."""
    try:
        import nkeys
    except ImportError as err:  # pragma: no cover - a dependency; only a broken install lacks it
        raise AccessError("NATS nkey or creds login needs the nkeys package") from err
    try:
        pair = nkeys.from_seed(bytearray(seed.encode()))
    except Exception as err:  # noqa: BLE001 - nkeys raises its own error types, and binascii's
        raise AccessError(f"NATS nkey seed: not a seed ({type(err).__name__})") from err
    try:
        return pair.public_key.decode(), base64.b64encode(pair.sign(nonce)).decode()
    finally:
        pair.wipe()
