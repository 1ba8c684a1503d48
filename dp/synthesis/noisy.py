"""Noisy marginals: the DP outputs of the measurement stage, public once drawn."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from dprelease.dp.accounting.charges import MeasurementRecord
from dprelease.dp.errors import InternalError
from dprelease.dp.measurement.marginals import IntArray


@dataclass(frozen=True)
class NoisyMarginal:
    """A noisy contingency table: a DP output, safe to publish and to post-process.

    Attributes:
        columns: The measured columns, in axis order.
        shape: Domain size of each column.
        counts: Noisy counts, flattened row-major; may be negative before post-processing.
        measurement: The mechanism, scale and booked loss that produced it.
    """

    columns: tuple[str, ...]
    shape: tuple[int, ...]
    counts: IntArray
    measurement: MeasurementRecord

    def __post_init__(self) -> None:
        if int(np.prod(self.shape)) != len(self.counts):
            raise InternalError("NoisyMarginal: counts do not match the shape")

    @property
    def variance(self) -> float:
        """Noise variance of each cell."""
        std = self.measurement.std
        if std is None:
            raise InternalError("NoisyMarginal without a noise standard deviation")
        return std * std

    def table(self) -> npt.NDArray[np.int64]:
        """The counts as an array of ``shape``."""
        return self.counts.reshape(self.shape)
