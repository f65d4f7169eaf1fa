"""Where things are in the object store, and how it writes a digest.

    accelsim-traces/<trace>/<path>    a trace's files, as uploaded
    sims/<sim>/<attempt>/<name>       what a sim attempt left: its log, kernel-stats.csv, outputs
    gpu-config-files/<sha256>         a config variant's file, by the sha256 of its contents
"""

from __future__ import annotations

import base64
import hashlib

TRACE_FILES = "accelsim-traces"


def trace_file(trace_id: str, path: str) -> str:
    return f"{TRACE_FILES}/{trace_id}/{path}"


def trace_prefix(trace_id: str) -> str:
    return f"{TRACE_FILES}/{trace_id}/"


def sim_file(sim_id: str, attempt: int, name: str) -> str:
    return f"sims/{sim_id}/{attempt}/{name}"


def config_file(sha256: str) -> str:
    return f"gpu-config-files/{sha256}"


def digest(sha: hashlib._Hash) -> str:
    """A SHA-256 as the object store writes it, `SHA-256=<base64url>`."""
    return "SHA-256=" + base64.urlsafe_b64encode(sha.digest()).decode()
