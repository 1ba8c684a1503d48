"""Mechanisms: the secure noise source, additive discrete noise, the sparse vector technique, selection.

Each mechanism states its privacy loss, its noise scale and its error bars (:class:`dp.accounting.charges.Chargeable`);
none is run except through :func:`dp.accounting.charges.noisy_result`.
"""
