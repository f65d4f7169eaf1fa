"""`cascade run`, `cascade runs`, `cascade run show|cancel|delete|retry|add`, `cascade sim reference` and `cascade results`:
runs from a terminal, through the public API only.

Every command finds the server and token with `locate.api_client`. `--json` prints what the
API answered, byte for byte; a refused request is the API's detail as a ConfigError.
"""

from __future__ import annotations

import argparse
import re
import shutil
import sys
import zipfile
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Literal, TextIO, TypeVar
from urllib.parse import quote, urlencode

import msgspec

from cascade_app.config import ConfigError
from cascade_cli import run_watch, runs_text
from cascade_cli.client import READ_SIZE, ApiClient
from cascade_cli.locate import api_client
from cascade_core.ids import is_file_name
from cascade_api.models import Comparison, ReferenceComparison, RunDetail, RunFile, RunSummary
from cascade_core.gpu_configs import GpuConfig
from cascade_core.runs import RunCreate, RunEntries, RunEntry, SplitSpec
from cascade_host import new_ids

T = TypeVar("T")

# CONFIGxN: a config with N replicas (a lowercase x, then digits; few enough for the API
# to refuse a count out of range, rather than for the encoder to overflow).
REPLICAS = re.compile(r"(?P<config>.+)x(?P<count>[0-9]{1,9})")


def parse_entries(
    tokens: Sequence[str],
    known: set[str],
    split: SplitSpec | Literal["auto"] | None = None,
    reuse: bool = False,
    reference: bool = False,
    fresh: bool = False,
) -> list[RunEntry]:
    """Each token as a run entry: a known config's name is that config once (`SM61_TITANX`),
    else a trailing `xN` asks for N replicas (`SM61_TITANXx3`). Tokens naming one config
    stay separate entries, as the API allows; unknown configs are for the API to refuse.
    Every entry is split as `split` says, reuses repeated kernels if `reuse`, and has a
    reference for each sim if `reference`, and is simulated even when its result is known if `fresh`."""
    entries = []
    for token in tokens:
        replicas = None if token in known else REPLICAS.fullmatch(token)
        config, count = (replicas["config"], int(replicas["count"])) if replicas else (token, 1)
        entries.append(RunEntry(gpu_config=config, count=count, split=split, reuse=reuse, reference=reference, fresh=fresh))
    return entries


def split_arg(value: str) -> int | Literal["auto"]:
    """`--split`: a number of kernel launches per chunk, or auto."""
    if value == "auto":
        return "auto"
    if not value.isdigit() or int(value) < 1:
        raise argparse.ArgumentTypeError(f"expected a number of kernel launches (1 or more) or auto, not {value!r}")
    return int(value)


def _split(args: argparse.Namespace) -> SplitSpec | Literal["auto"] | None:
    if args.warmup is not None and not isinstance(args.split, int):
        raise ConfigError("--warmup goes with --split K")
    if args.split is None or args.split == "auto":
        return args.split  # type: ignore[no-any-return]  # None or "auto", as split_arg gives
    return SplitSpec(args.split) if args.warmup is None else SplitSpec(args.split, args.warmup)


def print_json(raw: bytes) -> None:
    sys.stdout.flush()
    sys.stdout.buffer.write(raw.rstrip(b"\n") + b"\n")
    sys.stdout.buffer.flush()


def _print(lines: Sequence[str], out: TextIO | None = None) -> None:
    print("\n".join(lines), file=out or sys.stdout, flush=True)


def quoted_id(value: str) -> str:
    """An id as one path segment of a URL."""
    return quote(value, safe="")


# --- cascade run TRACE CONFIG[xN]... ---------------------------------------------------------


def _entries(client: ApiClient, args: argparse.Namespace) -> list[RunEntry]:
    configs = msgspec.json.decode(client.get("/api/gpu-configs"), type=list[GpuConfig])
    return parse_entries(args.configs, {c.name for c in configs}, _split(args), args.reuse, args.reference, args.fresh)


def create(args: argparse.Namespace) -> int:
    client = api_client(args)
    body = RunCreate(trace_id=args.trace, entries=_entries(client, args))
    raw = client.post("/api/runs", msgspec.json.encode(body), {"Content-Type": "application/json"})
    return _follow(args, client, raw)


def _follow(args: argparse.Namespace, client: ApiClient, raw: bytes, said: Callable[[RunDetail], str] = lambda run: run.id) -> int:
    """The run the API answered: `said` of it (--json: the RunDetail), or with --watch each
    sim's progress until the run ends."""
    created = msgspec.json.decode(raw, type=RunDetail)
    if not args.watch:
        if args.json:
            print_json(raw)
        else:
            print(said(created))
        return 0
    # With --json, stdout holds only the run as it ended; what a person reads goes to stderr.
    out = sys.stderr if args.json else sys.stdout
    print(created.id, file=out, flush=True)
    try:
        ended = run_watch.watch(client, created, run_watch.Screen(out))
    except KeyboardInterrupt:
        print(
            f"cascade: stopped watching; run {created.id} goes on (watch it again with: cascade run watch {created.id}; "
            f"cancel it with: cascade run cancel {created.id})",
            file=sys.stderr,
        )
        return 130
    _print(runs_text.outcome(ended), out)
    if args.json:
        print_json(msgspec.json.encode(ended))
    return 0 if all(sim.state == "succeeded" for sim in ended.sims) else 1


# --- cascade runs, run show, run cancel ------------------------------------------------------


def _answer(args: argparse.Namespace, raw: bytes, type_: type[T], text: Callable[[T], list[str]]) -> int:
    """The API's answer as it came with --json, else as text to read."""
    if args.json:
        print_json(raw)
    else:
        _print(text(msgspec.json.decode(raw, type=type_)))
    return 0


def list_runs(args: argparse.Namespace) -> int:
    query = urlencode({k: v for k, v in (("tag", args.tag), ("name", args.name), ("cycles", "true")) if v})
    return _answer(args, api_client(args).get(f"/api/runs?{query}"), list[RunSummary], runs_text.runs_table)


def show(args: argparse.Namespace) -> int:
    """The run (`cascade run show RUN`); as text, each sim's config by its label when its
    config's replicas ran files of several digests, as the run's comparison tells."""
    client = api_client(args)
    raw = client.get(f"/api/runs/{quoted_id(args.run_id)}")
    if args.json:
        return _answer(args, raw, RunDetail, runs_text.run_text)
    comparison = msgspec.json.decode(client.get(f"/api/runs/{quoted_id(args.run_id)}/comparison"), type=Comparison)
    return _answer(args, raw, RunDetail, lambda detail: runs_text.run_text(detail, comparison.config_labels or {}))


def watch(args: argparse.Namespace) -> int:
    """Follow a run until it ends (`cascade run watch RUN`), as `cascade run ... --watch` does:
    to watch again after Ctrl-C, or a run made elsewhere."""
    client = api_client(args)
    args.watch = True
    return _follow(args, client, client.get(f"/api/runs/{quoted_id(args.run_id)}"))


def _state(run: RunDetail) -> str:
    return f"run {run.id} {run.state}: {runs_text.counts(run.sim_counts)}"


def cancel(args: argparse.Namespace) -> int:
    raw = api_client(args).post(f"/api/runs/{quoted_id(args.run_id)}/cancel")
    return _answer(args, raw, RunDetail, lambda run: [_state(run)])


def delete(args: argparse.Namespace) -> int:
    """Delete a finished or cancelled run (`cascade run delete RUN`), asked first on a terminal
    unless --yes; without a terminal to ask on, only with --yes. With --json, the RunDetail
    as it was when deleted."""
    client = api_client(args)
    path = f"/api/runs/{quoted_id(args.run_id)}"
    raw = client.get(path)
    run = msgspec.json.decode(raw, type=RunDetail)
    if not args.yes:
        if not sys.stdin.isatty():
            raise ConfigError(f"run delete {args.run_id} asks before deleting, and there is no terminal to ask on: give --yes")
        print(f"delete {_state(run)}? Its sims' results, logs and files leave every list; its events stay in the log. [y/N] ", end="", file=sys.stderr, flush=True)
        if sys.stdin.readline().strip().lower() not in ("y", "yes"):
            print(f"run {run.id}: not deleted", file=sys.stderr)
            return 1
    return deleted(args, client, path, raw, f"run {run.id}")


def deleted(args: argparse.Namespace, client: ApiClient, path: str, before: bytes, what: str) -> int:
    """DELETE `path`, then say so: with --json, what it answered just `before`; else
    `<what>: deleted`."""
    client.request("DELETE", path)
    if args.json:
        print_json(before)
    else:
        print(f"{what}: deleted")
    return 0


def retry(args: argparse.Namespace) -> int:
    """A new attempt of every failed or cancelled sim (`cascade run retry RUN`)."""
    client = api_client(args)
    return _follow(args, client, client.post(f"/api/runs/{quoted_id(args.run_id)}/retry"), _state)


def add(args: argparse.Namespace) -> int:
    """More sims for a run (`cascade run add RUN CONFIG[xN]...`). The request carries a key
    of its own, so the server adds them once however often it is sent."""
    client = api_client(args)
    body = RunEntries(entries=_entries(client, args))
    headers = {"Content-Type": "application/json", "Idempotency-Key": new_ids.idempotency_key()}
    return _follow(args, client, client.post(f"/api/runs/{quoted_id(args.run_id)}/entries", msgspec.json.encode(body), headers), _state)


def compare(args: argparse.Namespace) -> int:
    raw = api_client(args).get(f"/api/runs/{quoted_id(args.run_id)}/comparison")
    return _answer(args, raw, Comparison, runs_text.counters_table if args.counters else runs_text.comparison_table)


def reference(args: argparse.Namespace) -> int:
    """A split or reusing sim's reference, asked for (once, however often), and the two
    compared (`cascade sim reference SIM`); with --watch, once the run has ended."""
    client = api_client(args)
    path = f"/api/sims/{quoted_id(args.sim_id)}/reference"
    raw = client.post(path)
    if not args.watch:
        return _answer(args, raw, ReferenceComparison, runs_text.reference_text)
    compared = msgspec.json.decode(raw, type=ReferenceComparison)
    out = sys.stderr if args.json else sys.stdout
    try:
        run_watch.watch(client, run_watch.get_run(client, compared.run_id), run_watch.Screen(out))
    except KeyboardInterrupt:
        print(f"cascade: stopped watching; the sims go on (cascade sim reference {args.sim_id} shows them)", file=sys.stderr)
        return 130
    raw = client.get(path)
    _answer(args, raw, ReferenceComparison, runs_text.reference_text)
    ended = msgspec.json.decode(raw, type=ReferenceComparison)
    return 0 if ended.fast.state == ended.reference.state == "succeeded" else 1


# --- cascade results RUN -o DIR --------------------------------------------------------------


def results(args: argparse.Namespace) -> int:
    """Download the run's results, and each sim's results, log and output files:

        DIR/run.json               the run's results, each sim's kernels left out
        DIR/results.json           the run's results whole, when it has at most WHOLE_JSON_KERNELS kernels
        DIR/<config>/r<replica>/results.json
        DIR/<config>/r<replica>/simulator.log
        DIR/<config>/r<replica>/files/<name>

    a folder per sim by what a person looks for (a config's replicas are numbered apart, so
    each sim has its own). The sims' results come in one zip (GET
    /api/runs/{id}/results?format=zip), each file as GET /api/sims/{id}/results answers it.
    """
    client = api_client(args)
    run = quoted_id(args.run_id)
    detail = run_watch.get_run(client, args.run_id)
    files = msgspec.json.decode(client.get(f"/api/runs/{run}/files"), type=list[RunFile])
    if detail.state == "active":
        print(f"cascade: run {detail.id} is still active: these are its results so far", file=sys.stderr)
    out = Path(args.output or detail.id)
    folders = {sim.id: out / _folder(sim.gpu_config) / f"r{sim.replica}" for sim in detail.sims}
    saved = _unzipped(client, f"/api/runs/{run}/results?format=zip", out, folders)
    if sum(sim.kernels_done for sim in detail.sims) <= WHOLE_JSON_KERNELS:
        saved.append(_save(client, f"/api/runs/{run}/results", out, "results.json"))
    for sim in detail.sims:
        sim_dir = folders[sim.id]
        saved.append(_save(client, f"/api/sims/{quoted_id(sim.id)}/log", sim_dir, "simulator.log"))
        for file in (f for f in files if f.sim_id == sim.id):
            saved.append(_save(client, f"/api/sims/{quoted_id(sim.id)}/files/{quoted_id(file.name)}", sim_dir / "files", _safe(file.name)))
    print(f"{len(saved)} files, {sum(saved):,} bytes, in {out}")
    return 0


# Past this many kernels the run's results as one JSON file (every sim's again) cost more than
# they are worth: run.json and the sims' files hold the same.
WHOLE_JSON_KERNELS = 1000
_SIM_FILE = re.compile(r"[^/]+/r[0-9]+/(?P<sim>[^/]+)-results\.json")


def _unzipped(client: ApiClient, path: str, out: Path, folders: Mapping[str, Path]) -> list[int]:
    """The zip of a run's results, downloaded beside `out` and unpacked into it: run.json, and
    each sim's file as results.json in its folder of `folders` (by sim id); the sizes of the
    files written."""
    archive_path = out / ".results.zip"
    _download(client, path, archive_path)
    sizes = []
    try:
        with zipfile.ZipFile(archive_path) as archive:
            for member in archive.infolist():
                sim = _SIM_FILE.fullmatch(member.filename)
                if member.filename != "run.json" and (sim is None or sim["sim"] not in folders):
                    continue  # a file this CLI does not know yet, or of a sim added since it read the run
                target = out / "run.json" if sim is None else folders[sim["sim"]] / "results.json"
                sizes.append(_written(archive, member, target))
    except zipfile.BadZipFile as err:
        raise ConfigError(f"GET {path}: the zip is broken ({err})") from err
    finally:
        archive_path.unlink(missing_ok=True)
    return sizes


def _written(archive: zipfile.ZipFile, member: zipfile.ZipInfo, target: Path) -> int:
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        with archive.open(member) as source, target.open("wb") as written:
            shutil.copyfileobj(source, written, READ_SIZE)
    except OSError as err:
        raise ConfigError(f"{target}: {err.strerror or err}") from err
    print(f"{target}  {member.file_size:,} bytes", flush=True)
    return member.file_size


def _safe(name: str) -> str:
    """A name the server gave, checked again before it becomes a path on this disk."""
    if not is_file_name(name):
        raise ConfigError(f"the server named a file {name!r}, which is not a safe file name")
    return name


def _folder(config: str) -> str:
    """A config's name as a folder, as it is (an unnamed variant's `+` too), checked as a file
    name the server gave is."""
    _safe(config.replace("+", "_"))
    return config


def _save(client: ApiClient, path: str, directory: Path, name: str) -> int:
    size = _download(client, path, directory / name)
    print(f"{directory / name}  {size:,} bytes", flush=True)
    return size


def _download(client: ApiClient, path: str, target: Path) -> int:
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        return client.download(path, target)
    except OSError as err:
        raise ConfigError(f"{target}: {err.strerror or err}") from err
