"""``python -m dprelease``: the same command line as ``dprelease``."""

from __future__ import annotations

from dprelease.flows.cli import main

if __name__ == "__main__":
    raise SystemExit(main())
