"""Trace uploads: the body streamed through decompression and a tar reader into the
object store, each file looked at on the way, then decided on by `cascade_core.traces`.

    body.py      the body's decompression, and how far it may expand
    inflate.py   incremental gzip / xz decoding with bounded output
    tar.py       the tar stream, entry by entry
    layout.py    entry names to trace paths (root or one top folder)
    findings.py  what the files say: kernel headers, xz integrity, small files
    store.py     files into the object store, removed again on any failure
    receive.py   the upload command: one upload from its first event to its outcome
"""
