"""Where the service is and what its token is: one lookup for every command that talks to
the API, and for the Python client's `cascade_client.connect`.

    URL:   --url, else CASCADE_URL, else the api_url in the service file of the server that
           holds the data dir (`<data dir>/service.json`), else http://127.0.0.1:8000
    token: CASCADE_TOKEN, else `<data dir>/token`

The data dir is --data-dir, else CASCADE_DATA_DIR, else ./.cascade. Errors say where the
URL and the token came from, and where else they could have.
"""

from __future__ import annotations

import argparse
import os
import msgspec

from cascade_app.config import DEFAULT_HOST, DEFAULT_PORT, ENV, ConfigError, Settings, read_secret, resolve
from cascade_cli.client import ApiClient
from cascade_process import datadir

DEFAULT_URL = f"http://{DEFAULT_HOST}:{DEFAULT_PORT}"
ENV_URL = "CASCADE_URL"


class Located(msgspec.Struct, frozen=True):
    url: str
    source: str  # where the URL came from, for error messages


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of every command that talks to the API."""
    parser.add_argument("--url", help=f"the server (CASCADE_URL; default: the data dir's live server, else {DEFAULT_URL})")
    parser.add_argument("--data-dir", help="the server's data dir, for its URL and token (CASCADE_DATA_DIR, default ./.cascade)")


def served_url(args: argparse.Namespace) -> Located | None:
    """The server's URL from --url, CASCADE_URL or the data dir's live service; None if
    none of them names one."""
    return find_url(getattr(args, "url", None), getattr(args, "data_dir", None))


def api_client(args: argparse.Namespace) -> ApiClient:
    """A client of the server found by the lookup above, with its token."""
    return client_of(getattr(args, "url", None), getattr(args, "data_dir", None))


def _settings(data_dir: str | os.PathLike[str] | None) -> Settings:
    return resolve({"data_dir": None if data_dir is None else os.fspath(data_dir)})


def find_url(url: str | None, data_dir: str | os.PathLike[str] | None) -> Located | None:
    """The lookup of `served_url` on values (the Python client's `connect` takes them as arguments)."""
    if url:
        return Located(url, "--url")
    if os.environ.get(ENV_URL):
        return Located(os.environ[ENV_URL], ENV_URL)
    directory = _settings(data_dir).data_dir
    service = datadir.live_service(directory)
    if service is not None:
        return Located(service.api_url, f"{directory / datadir.SERVICE}, pid {service.pid}")
    return None


def client_of(url: str | None, data_dir: str | os.PathLike[str] | None, token: str | None = None) -> ApiClient:
    """The lookup of `api_client` on values; a `token` given goes before CASCADE_TOKEN and the data dir's."""
    settings = _settings(data_dir)
    located = find_url(url, data_dir) or Located(
        DEFAULT_URL, f"the default: no server holds {settings.data_dir}; pass --url, or --data-dir with the server's data dir"
    )
    token_file = settings.token_path
    if token is not None:
        refused = "the token given"
    elif settings.token is not None:
        token = settings.token
        other = f"unset it to use {token_file}" if token_file.exists() else f"{token_file} does not exist either"
        refused = f"the token from {ENV['token']}; {other}"
    else:
        token = read_secret(token_file, "token")
        if token is None:
            raise ConfigError(
                f"no API token: {ENV['token']} is not set and {token_file} does not exist; "
                f"set {ENV['token']}, or pass --data-dir with the server's data dir"
            )
        refused = f"the token from {token_file}; set {ENV['token']} to the server's token, or pass --data-dir with its data dir"
    return ApiClient(
        located.url, token, on_unauthorized=f"the server refused {refused}", on_unreachable=f"URL from {located.source}"
    )
