"""The fit's flat inner loop: probability-space calibration, its log-space fallback, the loss and its gradient."""

from __future__ import annotations

import numpy as np

from dprelease.dp.synthesis.arrays import FloatArray, align, sum_to
from dprelease.dp.synthesis.fitloss import FlatLoss
from dprelease.dp.synthesis.junction import JunctionTree, Marginal, estimate

SIZES = {"a": 3, "b": 4, "c": 2, "d": 5, "e": 3}
# A forest: (a, b) > (b, c) > (c, d), and a second component (e,).
TREE = JunctionTree((("a", "b"), ("b", "c"), ("c", "d"), ("e",)), (None, 0, 1, None), SIZES)


def _marginals(rng: np.random.Generator) -> list[Marginal]:
    def noisy(columns: tuple[str, ...]) -> FloatArray:
        return rng.normal(50.0, 20.0, size=tuple(SIZES[c] for c in columns))

    return [Marginal(("a", "b"), noisy(("a", "b")), 4.0), Marginal(("c", "b"), noisy(("c", "b")), 9.0),
            Marginal(("d",), noisy(("d",)), np.arange(1.0, 6.0)), Marginal(("c", "d"), noisy(("c", "d")), 2.0),
            Marginal(("e",), noisy(("e",)), 1.0), Marginal(("b",), noisy(("b",)), 3.0)]



def _flat(loss: FlatLoss, potentials: list[FloatArray]) -> FloatArray:
    return loss.flatten(potentials)


def _potentials(rng: np.random.Generator, spread: float) -> list[FloatArray]:
    return [rng.normal(0.0, spread, size=TREE.shape(i)) for i in range(len(TREE.cliques))]


def test_calibration_equals_the_log_space_one() -> None:
    rng = np.random.default_rng(3)
    marginals = _marginals(rng)
    loss = FlatLoss(TREE, marginals, [TREE.host(m.columns) for m in marginals], 100.0)
    for spread in (0.0, 1.0, 5.0):
        potentials = _potentials(rng, spread)
        got = loss.views(loss.calibrate(_flat(loss, potentials)))
        want = [np.exp(b) for b in TREE.calibrate(potentials)]
        assert all(np.allclose(g, w, rtol=1e-12, atol=1e-15) for g, w in zip(got, want, strict=True))
        assert all(abs(float(g.sum()) - 1.0) < 1e-12 for g in got)


def test_an_underflowing_message_falls_back_to_log_space() -> None:
    """Log-potentials 2,000 apart: every cell of a separator value underflows in probability space."""
    rng = np.random.default_rng(4)
    marginals = _marginals(rng)
    loss = FlatLoss(TREE, marginals, [TREE.host(m.columns) for m in marginals], 100.0)
    potentials = _potentials(rng, 1.0)
    potentials[1][:, 0] -= 2000.0  # given b, c = 0 is exp(-2000) times less likely: the (b, c) -> b message has 0s
    potentials[2][0, :] += 2000.0  # ... and c = 0 is favoured again by (c, d): the two cancel in the marginals
    got = loss.views(loss.calibrate(_flat(loss, potentials)))
    want = [np.exp(b) for b in TREE.calibrate(potentials)]
    assert all(np.isfinite(g).all() for g in got)  # in probability space 0/0: the log-space result is used
    assert all(np.allclose(g, w, rtol=1e-9, atol=1e-15) for g, w in zip(got, want, strict=True))


def test_loss_and_gradient_match_the_definition() -> None:
    rng = np.random.default_rng(5)
    marginals = _marginals(rng)
    hosts = [TREE.host(m.columns) for m in marginals]
    scale = 120.0
    loss = FlatLoss(TREE, marginals, hosts, scale)
    potentials = _potentials(rng, 1.0)
    value, gradient, probabilities = loss(_flat(loss, potentials))
    tables = [np.exp(b) for b in TREE.calibrate(potentials)]
    want_value = 0.0
    want_gradient = [np.zeros(TREE.shape(i)) for i in range(len(TREE.cliques))]
    for m, host in zip(marginals, hosts, strict=True):
        residual = sum_to(tables[host], TREE.cliques[host], m.columns) * scale - m.values
        want_value += 0.5 * float((residual**2 / m.variance).sum())
        want_gradient[host] = want_gradient[host] + align(residual * scale / m.variance, m.columns, TREE.cliques[host])
    assert abs(value - want_value) < 1e-9 * want_value
    assert all(np.allclose(g, w) for g, w in zip(loss.views(gradient), want_gradient, strict=True))
    assert np.allclose(probabilities, loss.flatten(tables))
    # The gradient is the derivative of the loss with respect to the clique marginals (finite differences).
    flat_tables = loss.flatten(tables)
    for cell in rng.choice(loss.cells, size=5, replace=False):
        bumped = flat_tables.copy()
        bumped[cell] += 1e-6
        model = np.bincount(loss.targets, weights=bumped[loss.sources], minlength=loss.values.size)
        residual = model * scale - loss.values
        moved = 0.5 * float((residual * residual * loss.weights).sum()) / scale
        assert abs((moved - value) / 1e-6 - gradient[cell]) < 1e-3 * max(1.0, abs(gradient[cell]))


def test_the_fit_lowers_the_loss_and_reproduces_consistent_measurements() -> None:
    rng = np.random.default_rng(6)
    truth = [np.exp(b) for b in TREE.calibrate(_potentials(rng, 1.0))]
    exact = [Marginal(TREE.cliques[i], truth[i] * 1000.0, 1.0) for i in range(len(TREE.cliques))]
    fitted = estimate(TREE, exact, 1000.0, iterations=2000)
    assert fitted.loss < 1e-3
    assert all(np.allclose(f, t, atol=1e-4) for f, t in zip(fitted.cliques, truth, strict=True))
