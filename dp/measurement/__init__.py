"""Measurement on raw rows: column domains and encoding, exact counts, clipping bounds, contributions.

The only part of :mod:`dp` that reads sensitive values; what leaves it is noisy (through a mechanism).
"""
