"""Where an archive entry goes in the trace: its path relative to the trace's root.

A trace archive holds its files at its root or under one top folder, which is dropped. Which
of the two is only certain at the end, so the first entry makes a guess: a directory, or a
path inside one, means "one top folder" (`tar -cf t.tar demo` starts with `demo/`). An entry
outside that folder disproves the guess; `place` then says so, and the caller moves what it
placed so far back under the folder's name. Archives made with `tar -C demo -cf t.tar .` or
by `cascade trace upload` hold files at their root and never need that.
"""

from __future__ import annotations

import msgspec

from cascade_formats.tracefiles import TraceError, safe_member_path


class Placed(msgspec.Struct, frozen=True):
    path: str | None  # None for the archive's root or the top folder itself
    moved_under: str | None = None  # set once, when the top-folder guess turns out wrong


class Layout:
    def __init__(self) -> None:
        self.top: str | None = None
        self._guessed = False

    def place(self, name: str, kind: str) -> Placed:
        if kind == "directory" and not name.startswith("/") and all(p in ("", ".") for p in name.split("/")):
            return Placed(None)  # "./": the archive's root itself
        path = safe_member_path(name)
        if path is None or any("\udc80" <= ch <= "\udcff" for ch in name):
            raise TraceError(
                f"archive member {name[:200]!r} is not allowed: a path must be UTF-8 and stay inside the trace "
                "(no '..', no absolute path, no backslashes or control characters)"
            )
        parts = path.split("/")
        moved = None
        if not self._guessed:
            self._guessed = True
            if len(parts) > 1 or kind == "directory":
                self.top = parts[0]
        elif self.top is not None and (parts[0] != self.top or (len(parts) == 1 and kind != "directory")):
            moved, self.top = self.top, None
        if self.top is None:
            return Placed(path, moved)
        return Placed("/".join(parts[1:]) or None, moved)
