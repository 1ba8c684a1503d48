"""Local differential privacy: each person randomises their own report before it leaves the device.

Client side (:mod:`dp.local.randomizers`, no Prefect, numpy only): randomized response (binary and k-ary,
GRR), unary encoding (SUE, i.e. basic one-time RAPPOR, and OUE), optimal local hashing (OLH) and
RAPPOR's encoder (Bloom filter, cohorts, memoised permanent and per-report instantaneous randomized
response). Every random choice comes from the operating system's secure source
(:class:`dp.local.bits.SecureBits`); every probability is a rational number rounded towards more
privacy, and each randomizer states the epsilon its rounded probabilities actually give.

Server side (:mod:`dp.local.estimators`, :mod:`dp.local.rappor`): unbiased count estimates with their
exact variance and confidence intervals, and RAPPOR decoding (least squares on every candidate with exact
sandwich standard errors and one-sided tests under Holm's, Bonferroni's or the two-stage per-family
correction; Lasso selection on a split sample
when the candidates outnumber what the Bloom bits identify).
"""
