"""`cascade run delete RUN [--yes] [--json]` as a user runs it, against a real server whose
runner drives the fake simulator: asked on a terminal, refused without one unless --yes, the
run gone from `cascade runs` and its events still in `cascade events`."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from tests.cascade_http.live import LiveServer
from tests.cascade_http.test_runs_cli import api, cascade, cli_env, live, tree, upload_combo

__all__ = ["live", "tree"]  # the fixtures, used here by name


def on_a_terminal(live: LiveServer, answer: str, *args: str) -> tuple[int, str, str]:
    """`cascade ARGS` with a terminal for stdin, on which the user types `answer`."""
    ours, theirs = os.openpty()
    command = [sys.executable, "-m", "cascade_cli", *args]
    with subprocess.Popen(
        command, stdin=theirs, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=cli_env(CASCADE_URL=live.url)
    ) as asked:
        os.close(theirs)
        os.write(ours, answer.encode())
        out, err = asked.communicate(timeout=120)
    os.close(ours)
    return asked.returncode, out, err


def test_run_delete_asks_on_a_terminal_and_the_run_is_gone_but_its_events_stay(live: LiveServer) -> None:
    upload_combo(live)
    first, second = (cascade(live, "run", "combo", "SM61_TITANX", "--watch").stdout.splitlines()[0] for _ in range(2))

    piped = cascade(live, "run", "delete", first)
    assert (piped.returncode, piped.stderr) == (
        2, f"cascade: error: run delete {first} asks before deleting, and there is no terminal to ask on: give --yes\n"
    )
    declined = on_a_terminal(live, "n\n", "run", "delete", first)
    assert declined == (
        1, "", f"delete run {first} succeeded: 1 succeeded? Its sims' results, logs and files leave every list; its events stay in the "
        f"log. [y/N] run {first}: not deleted\n"
    )
    assert api(live, f"/api/runs/{first}").json()["state"] == "succeeded"
    confirmed = on_a_terminal(live, "y\n", "run", "delete", first)
    assert confirmed[:2] == (0, f"run {first}: deleted\n"), confirmed

    before = api(live, f"/api/runs/{second}").json()
    as_json = cascade(live, "run", "delete", second, "--yes", "--json")
    assert as_json.returncode == 0, as_json.stderr
    assert json.loads(as_json.stdout) == before
    assert cascade(live, "runs").stdout == "no runs\n"

    again = cascade(live, "run", "delete", first, "--yes")
    assert (again.returncode, again.stderr) == (2, f"cascade: error: GET /api/runs/{first}: 404 run {first} not found\n")
    history = cascade(live, "events", first, "--nats-url", live.nats_url)
    assert history.returncode == 0, history.stderr
    types = [line.split()[2] for line in history.stdout.splitlines()]
    assert (types[0], types[-1]) == ("run.created.v1", "run.deleted.v1") and "sim.finished.v1" in types
