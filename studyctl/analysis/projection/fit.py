"""Time at full size, fitted from runs at smaller scales, instead of bytes over a small run's bandwidth.

A checkpoint phase's time (its span: first rank's start to last rank's end) is modelled per rank as

    t = fixed + per_file × files per rank + bytes per rank / bandwidth,   every part ≥ 0

and fitted over the runs of one resource shape (`studyctl.definition.planning.shapes`: the same nodes, ranks,
filesystem,
I/O mode and block), whatever their model or scale. `scale` shrinks every tensor and keeps the files, so within
one layout the file count never varies: its fixed and per-file parts are one intercept. They separate only where
runs of other layouts of the same shape (other file counts per rank) are in the fit; otherwise the per-file term
is left out and the intercept carries both (`Fit.separable`).

Each part is a physical cost, so none may be negative (`analysis.nnls`: least squares under c ≥ 0; a part at its
bound is 0 and left out of the band). A run's spread grows with its time (a disk that varies by some percent
varies by seconds on a long run), so residuals are relative: each run is weighed by 1 / (its fitted time)², the
same for every repetition of one size (weighing by a run's own time would favour its fastest repetitions and pull
the fit below the typical run). The band is a 95% prediction interval for one run at the projected size, made in
log space so that it is a factor either way and never reaches zero: the spread of log(measured / fitted) over the
fit's runs, and the fit's own uncertainty at the projected size from its covariance (`Fit.band_factor`), which
grows with the reach beyond what was measured.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from studyctl.analysis.projection.nnls import nnls
from studyctl.definition.inputs.tdist import t_quantile_975
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
    """t = fixed + per_file × files + s_per_GiB × GiB, per rank, every part ≥ 0; a term left out of the fit, or
    held at its bound 0, is 0 in `coef`."""

    coef: tuple[float, float, float]  # TERMS
    used: tuple[bool, bool, bool]  # which terms were in the fit
    free: tuple[bool, bool, bool]  # which came out positive (the others are 0 at their bound)
    # the used terms' covariance, relative: (XᵀWX)⁻¹ σ², W = 1 / fitted time²; a term at its bound keeps its
    # uncertainty (it may be positive: the band's upper end says how much)
    cov: tuple[tuple[float, ...], ...]
    residual_sd: float  # in log space: of log(time / fitted time)
    n: int
    largest_scale: float
    largest_bytes_per_rank: float
    scales: tuple[float, ...]  # the distinct scales measured

    @property
    def separable(self) -> bool:
        """Whether the fixed and per-file parts were told apart (runs of more than one file count)."""
        return self.used[1]

    @property
    def dof(self) -> int:
        return self.n - sum(self.used)

    @property
    def bandwidth_GiBps(self) -> float:
        """Per rank, the fitted marginal bandwidth (what the bytes term implies)."""
        return 1.0 / self.coef[2] if self.coef[2] > 0 else math.inf

    def relative_se(self, files_per_rank: float, bytes_per_rank: float) -> tuple[float, float]:
        """(fitted seconds, the fit's own standard error there relative to them)."""
        x = np.array([1.0, files_per_rank, bytes_per_rank / GIB])
        seconds = float(x @ np.array(self.coef))
        if seconds <= 0:
            return seconds, math.nan
        row = x[list(self.used)]
        own = float(row @ np.array(self.cov) @ row) if len(row) else 0.0
        return seconds, math.sqrt(max(own, 0.0)) / seconds

    def band_factor(self, files_per_rank: float, bytes_per_rank: float) -> tuple[float, float]:
        """(fitted seconds, the band's factor either way): the runs' log spread and the fit's own uncertainty, each
        as a 95% half-width in log space, in quadrature. The fit's own is log(1 + t·se / fitted): its upper end is
        the covariance's linear band (fitted + t·se), its lower end that factor below, so a fit poorly determined
        far beyond its runs widens the band without taking its low end to 0 s."""
        seconds, rel = self.relative_se(files_per_rank, bytes_per_rank)
        t = t_quantile_975(self.dof)
        half = math.hypot(t * self.residual_sd, math.log1p(t * rel))  # NaN rel (no positive time): NaN band
        return seconds, math.exp(half)

    def predict(self, files_per_rank: float, bytes_per_rank: float, label: str = "") -> Projection:
        seconds, factor = self.band_factor(files_per_rank, bytes_per_rank)
        reach = bytes_per_rank / self.largest_bytes_per_rank if self.largest_bytes_per_rank else math.inf
        scales = ", ".join(f"{s:g}" for s in self.scales)
        held = [name for name, u, f in zip(TERM_WORDS, self.used, self.free, strict=True) if u and not f]
        basis = (f"fit of {self.n} runs at scales {scales}{label}"
                 + ("" if self.separable else "; fixed and per-file parts as one intercept")
                 + (f"; {', '.join(held)} at 0 (a negative cost is not physical)" if held else ""))
        return Projection(seconds, seconds / factor, seconds * factor, self.largest_scale, reach, basis)


TERM_WORDS = ("fixed part", "per-file part", "per-byte part")  # TERMS in words
# Sizes per rank closer than this are one size: layouts of one scale differ by fractions of a byte in their mean
# bytes per rank (ZeRO-1 vs ZeRO-3 of one model), which tells a bandwidth nothing and made the system singular.
MIN_SIZE_SPREAD = 0.01
REWEIGHTS = 3  # fits with weights from the previous fit's times: the weights settle in two


def fit(observations: Sequence[Observation]) -> Fit | None:
    """The fit, or None where it cannot be made: fewer than two distinct sizes, or no degree of freedom left for
    a band (a fit with no residual would state no uncertainty)."""
    obs = [o for o in observations if o.seconds > 0 and math.isfinite(o.seconds)]
    sizes = [o.bytes_per_rank for o in obs]
    if not sizes or max(sizes) <= min(sizes) * (1 + MIN_SIZE_SPREAD):
        return None
    files = {o.files_per_rank for o in obs}
    used = (True, len(files) > 1, True)
    x = np.array([[1.0, o.files_per_rank, o.bytes_per_rank / GIB] for o in obs])[:, list(used)]
    y = np.array([o.seconds for o in obs])
    if len(obs) <= x.shape[1] or np.linalg.matrix_rank(x) < x.shape[1]:
        if used[1]:  # file counts that vary only together with the sizes: fall back to one intercept
            return fit([Observation(0.0, o.bytes_per_rank, o.seconds, o.scale) for o in obs])
        return None
    coef, free, fitted = _weighted_nnls(x, y, _size_means(obs))
    log_residuals = np.log(y / fitted)
    dof = len(obs) - x.shape[1]  # every term that could move, held at its bound or not
    sd = float(math.sqrt(float(log_residuals @ log_residuals) / dof))
    xw = x / fitted[:, None]  # relative: the same weights the fit used
    cov = np.linalg.pinv(xw.T @ xw) * sd ** 2  # pinv: near-singular is fine
    full, free_all = iter(coef.tolist()), iter(free.tolist())
    largest = max(obs, key=lambda o: o.bytes_per_rank)
    return Fit(coef=tuple(next(full) if u else 0.0 for u in used),  # type: ignore[arg-type]
               used=used, free=tuple(bool(next(free_all)) if u else False for u in used),  # type: ignore[arg-type]
               cov=tuple(map(tuple, cov.tolist())), residual_sd=sd, n=len(obs),
               largest_scale=max(o.scale for o in obs), largest_bytes_per_rank=largest.bytes_per_rank,
               scales=tuple(sorted({o.scale for o in obs})))


def _size_means(obs: Sequence[Observation]) -> np.ndarray:
    """Each run's first weight: the mean time of the runs of its size (its repetitions), not its own time."""
    groups: dict[tuple[float, float], list[float]] = {}
    for o in obs:
        groups.setdefault((o.files_per_rank, o.bytes_per_rank), []).append(o.seconds)
    return np.array([math.fsum(g) / len(g) for g in (groups[(o.files_per_rank, o.bytes_per_rank)] for o in obs)])


def _weighted_nnls(x: np.ndarray, y: np.ndarray, typical: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(coef ≥ 0, free, fitted times): relative least squares, each run weighed by 1 / typical², the typical time
    then the fitted one (iteratively reweighted: the weights never depend on one repetition's own noise)."""
    coef, free, fitted = np.zeros(x.shape[1]), np.zeros(x.shape[1], dtype=bool), typical
    for _ in range(REWEIGHTS):
        coef, free = nnls(x / typical[:, None], y / typical)
        fitted = x @ coef
        if (fitted <= 0).any():  # a run the fit gives no time (a part it lacks): keep the last weights
            break
        typical = fitted
    fitted = np.where(fitted > 0, fitted, typical)
    return coef, free, fitted


def plain_projection(nominal_bytes: float, bandwidth_GiBps: float, scale: float) -> Projection | None:
    """The fallback where no fit exists: nominal bytes over the run's own bandwidth (time ∝ bytes), no band."""
    if not nominal_bytes or not bandwidth_GiBps or bandwidth_GiBps <= 0 or not math.isfinite(bandwidth_GiBps):
        return None
    seconds = nominal_bytes / GIB / bandwidth_GiBps
    return Projection(seconds, math.nan, math.nan, scale, 1.0 / scale if scale else math.inf,
                      "plain scaling (no fit: time assumed ∝ bytes)")
