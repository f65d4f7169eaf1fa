"""The application layer: the service a process runs, and the commands it carries out.

    config.py         settings from flags and environment variables, checked at start
    service.py        `Cascade`: the store, objects, read model and runners a command or read uses
    reads.py          reading the read model in a worker thread (`Unavailable` while rebuilt)
    conflicts.py      the one rule for commands that race: decided again on what won
    runs.py           create a run, cancel one
    traces.py         delete a trace, attach real timing to one
    uploads/          the upload command: a body streamed into the object store and decided on
    clock.py          the time and ids commands take from the world
    step_timelines.py, lru.py   what reads compute and keep

Commands decide with the pure functions of `cascade_core` and say what went wrong with
`cascade_core.refusals`; the edges (the API's routes, and through the API the CLI and the web
app) call them and say it their own way. Nothing here knows HTTP.
"""
