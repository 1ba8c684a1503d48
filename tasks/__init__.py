"""Thin Prefect tasks: one unit of work each, with the settings that keep DP safe.

A task that reads raw data or draws noise is declared with :data:`SENSITIVE`: no retries (a
retry would draw fresh noise), no cache and no persisted result (Prefect's result storage would
keep whatever the task returns). Such tasks carry the tag ``dp:sensitive`` so that a test can
walk every task and check its settings. Raw data never crosses a task boundary: tasks pass paths,
plans and noisy results.
"""

from __future__ import annotations

from typing import Any

from prefect.cache_policies import NO_CACHE

SENSITIVE_TAG = "dp:sensitive"

SENSITIVE: dict[str, Any] = {
    "retries": 0,
    "cache_policy": NO_CACHE,
    "persist_result": False,
    "tags": [SENSITIVE_TAG],
}
"""Task options for anything that reads raw data, draws noise or writes the ledger."""

PUBLIC: dict[str, Any] = {
    "retries": 0,
    "cache_policy": NO_CACHE,
    "persist_result": False,
}
"""Task options for post-processing: no caching either (results are cheap and release-specific)."""
