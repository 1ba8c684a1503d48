"""The app factory of the command's embedded Prefect server: Prefect's own, built with the collector paused.

:class:`flows.settings.EmbeddedServer` runs uvicorn on :func:`create_app`. Importing Prefect's
server package and building its app create several hundred thousand long-lived objects, and each
full pass of Python's cyclic garbage collector on the way scans all of them again: about a fifth
of the server's start-up CPU, on the path of every ``dprelease release``. Here the collector is
paused while Prefect builds its app, and the objects alive then are frozen (``gc.freeze``: left out
of later passes) before it resumes; the app is Prefect's, unchanged.
"""

from __future__ import annotations

import gc
from typing import Any


def create_app() -> Any:
    """Prefect's ``prefect.server.api.server.create_app()``; its settings come from the environment."""
    gc.disable()
    try:
        from prefect.server.api.server import create_app as prefect_app

        return prefect_app()
    finally:
        gc.freeze()
        gc.enable()
