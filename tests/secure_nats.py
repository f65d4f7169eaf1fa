"""What a locked-down NATS needs, made by the test: a CA and certificates signed by it
(`openssl`), nkeys (the `nkeys` package), and for `.creds` logins an operator, an account and
a user as signed JWTs, the way `nsc` makes them (`nsc` is not installed here)."""

from __future__ import annotations

import base64
import json
import os
import subprocess
import time
from pathlib import Path
from typing import Any

import msgspec
import nkeys  # type: ignore[import-untyped]  # nkeys ships no type information


class Certificates(msgspec.Struct, frozen=True, kw_only=True):
    ca: Path
    server_cert: Path
    server_key: Path
    client_cert: Path
    client_key: Path


def _openssl(*args: str | Path) -> None:
    subprocess.run(["openssl", *map(str, args)], check=True, capture_output=True)


def certificates(directory: Path) -> Certificates:
    """A CA, a server certificate for 127.0.0.1 and localhost, and a client certificate."""
    directory.mkdir(parents=True, exist_ok=True)
    ca, ca_key = directory / "ca.pem", directory / "ca-key.pem"
    _openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", "/CN=cascade test CA", "-keyout", ca_key, "-out", ca)
    made = {}
    for name, usage in (("server", "serverAuth"), ("client", "clientAuth")):
        key, csr, cert, ext = (directory / f"{name}{suffix}" for suffix in ("-key.pem", ".csr", ".pem", ".ext"))
        ext.write_text(f"subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage={usage}\n")
        _openssl("req", "-newkey", "rsa:2048", "-nodes", "-subj", f"/CN={name}", "-keyout", key, "-out", csr)
        _openssl("x509", "-req", "-in", csr, "-CA", ca, "-CAkey", ca_key, "-CAcreateserial", "-days", "2", "-extfile", ext, "-out", cert)
        made[name] = (cert, key)
    return Certificates(
        ca=ca,
        server_cert=made["server"][0],
        server_key=made["server"][1],
        client_cert=made["client"][0],
        client_key=made["client"][1],
    )


def nkey(prefix: int = nkeys.PREFIX_BYTE_USER) -> tuple[str, str]:
    """A new nkey: its seed and its public key."""
    seed = nkeys.encode_seed(os.urandom(32), prefix)
    pair = nkeys.from_seed(bytearray(seed))
    return seed.decode(), pair.public_key.decode()


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).decode().rstrip("=")


def jwt(subject: str, issuer_seed: str, name: str, nats: dict[str, Any]) -> str:
    """A JWT of NATS's kind: claims signed with the issuer's nkey (ed25519)."""
    issuer = nkeys.from_seed(bytearray(issuer_seed.encode()))
    claims = {"jti": _b64(os.urandom(16)), "iat": int(time.time()), "iss": issuer.public_key.decode(), "name": name, "sub": subject, "nats": nats}
    signed = _b64(json.dumps({"typ": "JWT", "alg": "ed25519-nkey"}).encode()) + "." + _b64(json.dumps(claims).encode())
    return signed + "." + _b64(issuer.sign(signed.encode()))


UNLIMITED = {"subs": -1, "data": -1, "payload": -1}


def operator_mode(directory: Path) -> tuple[dict[str, Any], Path]:
    """A server config's part that trusts an operator, and the .creds file of a user of its
    account (JetStream enabled); the user's seed is in the file, as `nsc` writes it."""
    operator_seed, operator = nkey(nkeys.PREFIX_BYTE_OPERATOR)
    account_seed, account = nkey(nkeys.PREFIX_BYTE_ACCOUNT)
    _, system = nkey(nkeys.PREFIX_BYTE_ACCOUNT)  # JetStream needs a system account to start
    user_seed, user = nkey(nkeys.PREFIX_BYTE_USER)
    limits = UNLIMITED | {"imports": -1, "exports": -1, "wildcards": True, "conn": -1, "leaf": -1}
    limits |= {"mem_storage": -1, "disk_storage": -1, "streams": -1, "consumer": -1}
    account_jwt = jwt(account, operator_seed, "cascade", {"limits": limits, "type": "account", "version": 2})
    system_jwt = jwt(system, operator_seed, "SYS", {"limits": UNLIMITED, "type": "account", "version": 2})
    user_jwt = jwt(user, account_seed, "worker", {"pub": {}, "sub": {}, **UNLIMITED, "type": "user", "version": 2})
    creds = directory / "worker.creds"
    creds.write_text(
        f"-----BEGIN NATS USER JWT-----\n{user_jwt}\n------END NATS USER JWT------\n\n"
        "************************* IMPORTANT *************************\n"
        "NKEY Seed printed below can be used to sign and prove identity.\n\n"
        f"-----BEGIN USER NKEY SEED-----\n{user_seed}\n------END USER NKEY SEED------\n"
    )
    creds.chmod(0o600)
    config = {
        "operator": jwt(operator, operator_seed, "test operator", {"system_account": system, "type": "operator", "version": 2}),
        "system_account": system,
        "resolver": "MEMORY",
        "resolver_preload": {account: account_jwt, system: system_jwt},
    }
    return config, creds
