"""The processes Cascade runs, wired: what each starts, in what order, and keeps going.

    serve.py       `cascade serve`: the data dir locked, the port bound, NATS, uvicorn
    service.py     the service behind the API: connection, stores, read model, and the
                   supervised projector, dispatcher, local runner and embedded nats-server
    worker.py      `cascade worker`: a runner for a cluster, needing only its NATS
    connection.py  the NATS connection a process keeps
    event_log.py   the NATS a command uses: configured, the live server's, or embedded
    datadir.py     the data dir: its lock, `service.json`, private modes
    logs.py        log lines, with credentials redacted

The web server (`cascade_http`) knows nothing of this: it is given the service to run.
"""
