"""Time at full size, fitted from runs at smaller scales, instead of bytes over a small run's bandwidth.

A checkpoint phase's time (its span: first rank's start to last rank's end) is modelled per rank as

    t = fixed + per_file × files per rank + bytes per rank / bandwidth

and fitted by least squares over the runs of one resource shape (`studyctl.definition.shapes`: the same
nodes, ranks, filesystem, I/O mode and block), whatever their model or scale. `scale` shrinks every tensor
and keeps the files, so within one layout the file count never varies: its fixed and per-file parts are one
intercept. They separate only where runs of other layouts of the same shape (other file counts per rank)
are in the fit; otherwise the per-file term is left out and the intercept carries both (`Fit.separable`).
A run's spread grows with its time (a disk that varies by some percent varies by seconds on a long run), so
the fit weighs each run by 1 / its time² (relative residuals). The band is a 95% prediction interval for one
run at the projected size: the relative residuals of the fit (the repetitions included) at the projected time,
and the fit's own uncertainty, which grows with the distance beyond what was measured.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from studyctl.definition.tdist import t_quantile_975
from studyctl.units import GIB

# A projection to more than this many times the largest bytes per rank measured in its fit is flagged.
MAX_REACH = 10.0
TERMS = ("fixed_s", "per_file_s", "s_per_GiB")  # the model's coefficients, in the order of `Fit.coef`


@dataclass(frozen=True)
class Observation:
    """One run of one phase: its mean time per checkpoint, and what each rank moved."""

    files_per_rank: float
    bytes_per_rank: float
    seconds: float
    scale: float


@dataclass(frozen=True)
class Projection:
    """A projected time with its 95% band and what it rests on."""

    seconds: float
    low_s: float
    high_s: float
    largest_scale: float  # the largest scale measured in the fit
    reach: float  # projected bytes per rank / the largest measured
    basis: str  # one line: what the figure rests on

    @property
    def beyond_reach(self) -> bool:
        return self.reach > MAX_REACH * 1.001  # scaled bytes are whole: 1 / MAX_REACH of full size is within


@dataclass(frozen=True)
class Fit:
    """t = fixed + per_file × files + s_per_GiB × GiB, per rank; a term left out of the fit is 0 in `coef`."""

    coef: tuple[float, float, float]  # TERMS
    used: tuple[bool, bool, bool]  # which terms were fitted
    xtx_inv: tuple[tuple[float, ...], ...]  # (XᵀWX)⁻¹ over the fitted terms, W = 1 / time²
    residual_sd: float  # relative: of (time − fitted) / time
    n: int
    largest_scale: float
    largest_bytes_per_rank: float
    scales: tuple[float, ...]  # the distinct scales measured

    @property
    def separable(self) -> bool:
        """Whether the fixed and per-file parts were told apart (runs of more than one file count)."""
        return self.used[1]

    @property
    def bandwidth_GiBps(self) -> float:
        """Per rank, the fitted marginal bandwidth (what the bytes term implies)."""
        return 1.0 / self.coef[2] if self.coef[2] > 0 else math.inf

    def predict(self, files_per_rank: float, bytes_per_rank: float, label: str = "") -> Projection:
        row = np.array([1.0, files_per_rank, bytes_per_rank / GIB])[list(self.used)]
        seconds = float(row @ np.array(self.coef)[list(self.used)])
        spread = self.residual_sd * math.sqrt(seconds ** 2 + float(row @ np.array(self.xtx_inv) @ row))
        half = t_quantile_975(self.n - len(row)) * spread
        reach = bytes_per_rank / self.largest_bytes_per_rank if self.largest_bytes_per_rank else math.inf
        scales = ", ".join(f"{s:g}" for s in self.scales)
        basis = (f"fit of {self.n} runs at scales {scales}{label}" + ("" if self.separable
                 else "; fixed and per-file parts as one intercept"))
        return Projection(seconds, max(0.0, seconds - half), seconds + half, self.largest_scale, reach, basis)


# Sizes per rank closer than this are one size: layouts of one scale differ by fractions of a byte in their mean
# bytes per rank (ZeRO-1 vs ZeRO-3 of one model), which tells a bandwidth nothing and made the system singular.
MIN_SIZE_SPREAD = 0.01


def fit(observations: Sequence[Observation]) -> Fit | None:
    """The least-squares fit, or None where it cannot be made: fewer than two distinct sizes, or no degree of
    freedom left for a band (a fit with no residual would state no uncertainty)."""
    obs = [o for o in observations if o.seconds > 0 and math.isfinite(o.seconds)]
    sizes = [o.bytes_per_rank for o in obs]
    if not sizes or max(sizes) <= min(sizes) * (1 + MIN_SIZE_SPREAD):
        return None
    files = {o.files_per_rank for o in obs}
    used = (True, len(files) > 1, True)
    x = np.array([[1.0, o.files_per_rank, o.bytes_per_rank / GIB] for o in obs])[:, list(used)]
    y = np.array([o.seconds for o in obs])
    x, y = x / y[:, None], np.ones(len(obs))  # weighted by 1 / time²: relative residuals
    if len(obs) <= x.shape[1] or np.linalg.matrix_rank(x) < x.shape[1]:
        if used[1]:  # file counts that vary only together with the sizes: fall back to one intercept
            return fit([Observation(0.0, o.bytes_per_rank, o.seconds, o.scale) for o in obs])
        return None
    coef, *_ = np.linalg.lstsq(x, y, rcond=None)
    residuals = y - x @ coef
    dof = len(obs) - x.shape[1]
    full = iter(coef.tolist())
    largest = max(obs, key=lambda o: o.bytes_per_rank)
    return Fit(coef=tuple(next(full) if u else 0.0 for u in used),  # type: ignore[arg-type]
               used=used, xtx_inv=tuple(map(tuple, np.linalg.pinv(x.T @ x).tolist())),  # pinv: near-singular is fine
               residual_sd=float(math.sqrt(float(residuals @ residuals) / dof)), n=len(obs),
               largest_scale=max(o.scale for o in obs), largest_bytes_per_rank=largest.bytes_per_rank,
               scales=tuple(sorted({o.scale for o in obs})))


def plain_projection(nominal_bytes: float, bandwidth_GiBps: float, scale: float) -> Projection | None:
    """The fallback where no fit exists: nominal bytes over the run's own bandwidth (time ∝ bytes), no band."""
    if not nominal_bytes or not bandwidth_GiBps or bandwidth_GiBps <= 0 or not math.isfinite(bandwidth_GiBps):
        return None
    seconds = nominal_bytes / GIB / bandwidth_GiBps
    return Projection(seconds, math.nan, math.nan, scale, 1.0 / scale if scale else math.inf,
                      "plain scaling (no fit: time assumed ∝ bytes)")
