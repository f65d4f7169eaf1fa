"""A Python client of Cascade for notebooks and scripts:

    import cascade_client
    c = cascade_client.connect()                  # as `cascade` finds the service and its token
    c.upload_trace("traces/combo", id="combo")
    run = c.create_run("combo", ["SM61_TITANX"], replicas=2)
    run.wait()                                     # a progress bar on stderr
    run.kernels()                                  # a pandas DataFrame; to="polars" for polars
    c.sql("SELECT gpu_config, count(*) FROM sims GROUP BY ALL")

Errors the API answers are `Refused` (`status`, and `detail`: the API's text); a server
that cannot be reached is `Disconnected`; both are `CascadeError`s.
"""

from cascade_app.config import ConfigError as CascadeError
from cascade_cli.client import Disconnected, Refused
from cascade_client.campaign import Campaign
from cascade_client.run import Run
from cascade_client.session import Client, UploadFailed, connect

__all__ = ["CascadeError", "Campaign", "Client", "Disconnected", "Refused", "Run", "UploadFailed", "connect"]
