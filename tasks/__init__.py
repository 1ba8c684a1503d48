"""Thin Prefect tasks: one unit of work each, with the settings that keep DP safe.

A task that reads raw data or draws noise is declared with :func:`sensitive_task`: the options of
:data:`SENSITIVE` (no retries: a retry would draw fresh noise; no cache and no persisted result:
Prefect's result storage would keep whatever the task returns), and the mark ``dp_sensitive`` so
that a test can walk every task and check its settings. Raw data never crosses a task boundary:
tasks pass paths, plans and noisy results.

The mark is an attribute of the task object, not a Prefect tag: Prefect acquires a concurrency
slot lease from its API for every tag of every task run, a round trip that took up to 2 s per task
on the embedded server (a quarter of an Adult release), with no concurrency limit to enforce.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from prefect import Task, task
from prefect.cache_policies import NO_CACHE

SENSITIVE_MARK = "dp_sensitive"
"""The attribute set to True on every task that reads raw data, draws noise or writes the ledger."""

SENSITIVE: dict[str, Any] = {
    "retries": 0,
    "cache_policy": NO_CACHE,
    "persist_result": False,
}
"""Task options for anything that reads raw data, draws noise or writes the ledger."""

PUBLIC: dict[str, Any] = {
    "retries": 0,
    "cache_policy": NO_CACHE,
    "persist_result": False,
}
"""Task options for post-processing: no caching either (results are cheap and release-specific)."""

T = TypeVar("T", bound=Task[Any, Any])


def mark_sensitive(made: T) -> T:
    """Mark a task as reading raw data or drawing noise (see :func:`is_sensitive`); returns it."""
    setattr(made, SENSITIVE_MARK, True)
    return made


def is_sensitive(candidate: object) -> bool:
    """Whether a task carries the ``dp_sensitive`` mark."""
    return getattr(candidate, SENSITIVE_MARK, False) is True


def sensitive_task(name: str) -> Callable[[Callable[..., Any]], Task[Any, Any]]:
    """``@task(name=name, **SENSITIVE)``, marked as sensitive: the decorator of every raw-data task."""

    def decorate(function: Callable[..., Any]) -> Task[Any, Any]:
        return mark_sensitive(task(name=name, **SENSITIVE)(function))

    return decorate
