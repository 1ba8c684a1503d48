"""dp: the pure differential-privacy library of dprelease.

Mechanisms, exact accounting, the budget ledger, the sparse vector technique, marginals,
post-processing, model estimation and synthetic sampling. Nothing here imports Prefect; see
``tests/test_layers.py``.
"""
