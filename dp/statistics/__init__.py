"""DP summary statistics with error bars (issue 16): the library, without Prefect or a release flow.

* :mod:`dp.statistics.clipping`: public clipping bounds (declared, or found by SVT) and the public
  integer grid that clipped values are rounded to before any noise is added.
* :mod:`dp.statistics.moments`: count, sum and sum of squares of clipped values measured with the
  additive mechanism (exact integer noise, booked through :func:`dp.mechanisms.noise.measure`),
  post-processed into count, sum, mean, variance and standard deviation with 95 % intervals and a
  clipping-bias flag from a DP count of clipped rows.
* :mod:`dp.statistics.bias`: a DP estimate of the clipping bias of a mean or a sum (rows beyond each
  bound and their excess out to public caps, booked), a flag, and a corrected estimate whose interval
  combines the moments' and the bias's noise.
* :mod:`dp.statistics.quantiles`: quantiles by the exponential mechanism over the intervals between
  sorted clipped values (ties handled by interval widths), any list of quantiles, the median.
* :mod:`dp.statistics.ptr`: propose-test-release for the median, with the threshold
  ln(1/(2δ))/ε proven in ``docs/proofs/ptr_threshold.md``.
* :mod:`dp.statistics.simulate`: error bars by simulating the published mechanism's noise with a
  seeded generator (post-processing only: it sees noisy values and public parameters, never rows).
"""
