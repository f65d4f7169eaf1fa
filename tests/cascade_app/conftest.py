"""The application layer runs in the service an app's lifespan starts (tests/cascade_http)."""

from tests.cascade_http.conftest import accelsim_dir, client, settings

__all__ = ["accelsim_dir", "client", "settings"]
