"""Accounting: exact budgets, their conversions and composition, the lifetime ledger.

Also the one path by which every noisy result is replayed or charged, drawn and sealed
(:mod:`dp.accounting.charges`).
"""
