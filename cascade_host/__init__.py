"""What a process takes from the machine it runs on, besides the log: randomness for new ids
(`new_ids`) and the tuning of its heap (`heap`).

It sits just above `cascade_core`, below everything that runs (`cascade_nats` and up), so
the runner, the projector, the commands, the web server and the CLI all draw from one place,
and the core, given ids and times, never does. It imports nothing of Cascade.
"""
