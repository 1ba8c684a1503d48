"""Steward-only, non-private analytics: validation with Great Expectations, utility, disclosure risk.

Nothing here is published: results go to the steward-only area (never through a DP mechanism).
"""
