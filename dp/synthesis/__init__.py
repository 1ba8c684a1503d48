"""The noisy side: post-processing of DP outputs into a model and synthetic rows.

Structure selection (private, booked), consistency, the junction-tree estimator, hierarchies and sampling.
Nothing here reads raw rows.
"""
