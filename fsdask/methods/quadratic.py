"""Methods quadratic in the number of samples: their cost before the fit, and the subsample.

Q-α, Logo and the Laplacian score hold matrices between samples (n × n), and their work
grows as n² times the features.  Each estimator states that part of its cost as a
:class:`SampleCost` from the shape of X alone — before X is read — so a fit that cannot
hold its matrices is refused with a remedy (:meth:`fsdask.base.Selector._check_sample_matrices`)
and one that will take long says so first.  The remedy is ``max_samples=``: a seeded,
class-stratified :func:`subsample` of the rows (:class:`SampleLimit`, the estimators' shared
part), recorded in the result's provenance.

The work is a flop count of the n-dependent part, bounded above (every iteration to
``max_iter``, every feature active); its seconds use the rates measured on this project's
2-core test machine (:data:`RATES`) — an order of magnitude, not a promise: the passes
linear in n and dask's overhead come on top, which dominate small fits.
"""

from __future__ import annotations

import dataclasses
import hashlib
import math
from typing import Any

import dask.system
import numpy as np

from fsdask._validation import class_counts
from fsdask.errors import ParameterError
from fsdask.fitting import format_duration, progress_line

#: effective flop/s of one core for each kind of n-dependent work: the model's flop over the
#: wall time of whole fits on the project's 2-core machine (shared, load average 1–4), the
#: lower figure kept (an estimate too long rather than too short).  ``gemm`` (BLAS products of sample
#: blocks): the Laplacian score at n = p = 2000 gave 4.4e9, Q-α at n = 1500, p = 2000 (Gram
#: of W taken) 9e9; ``absdiff`` (Logo's weighted-Manhattan kernels): 9e8 at N = 600, J = 1000
RATES = {"gemm": 4e9, "absdiff": 8e8}


@dataclasses.dataclass(frozen=True)
class SampleCost:
    """The n-dependent cost of one fit, from the shape of X.

    Attributes
    ----------
    n_samples, n_features : int
        The samples the fit uses (after ``max_samples``) and the features of X.
    what : str
        The n × n matrices, as messages name them.
    copies : int
        n × n float64 matrices alive at the fit's peak (0: the method holds none).
    flop : float
        Floating-point operations of the n-dependent work of the whole fit, an upper bound.
    kind : str
        The kind of work (a key of :data:`RATES`).
    """

    n_samples: int
    n_features: int
    what: str
    copies: int
    flop: float
    kind: str = "gemm"

    @property
    def nbytes(self) -> float:
        """Bytes of the n × n matrices at the peak: ``8 · copies · n²``."""
        return 8.0 * self.copies * float(self.n_samples) ** 2

    @property
    def seconds(self) -> float:
        """The work's time at :data:`RATES` on ``dask.system.CPU_COUNT`` cores (an order of
        magnitude)."""
        return self.flop / (RATES[self.kind] * max(1, dask.system.CPU_COUNT))

    def largest_n(self, nbytes: float) -> int:
        """The most samples whose matrices fit in ``nbytes``."""
        return int(math.sqrt(nbytes / (8.0 * self.copies))) if self.copies else self.n_samples

    def work(self) -> str:
        """``~3.2e+14 flop at most (≈ 2.5 h on 2 cores)``: the bound (every iteration to
        ``max_iter``, every feature active), which a fit that converges early or drops
        features stays well below."""
        cores = max(1, dask.system.CPU_COUNT)
        return (
            f"~{self.flop:.2g} flop at most (≈ {format_duration(self.seconds)} on {cores} "
            f"core{'s' if cores > 1 else ''})"
        )

    def summary(self) -> str:
        """The progress line a fit starts with."""
        from dask.utils import format_bytes

        held = (
            f"{self.what} ≈ {format_bytes(self.nbytes)} ({self.copies} × n × n float64)"
            if self.copies
            else "no n × n matrix"
        )
        return f"{self.n_samples} samples × {self.n_features} features: {held}; work {self.work()}"


# --------------------------------------------------------------------------- the estimates
def qalpha_cost(
    n: int,
    p: int,
    *,
    k: int,
    copies: int,
    max_iter: int,
    n_init: int = 1,
    variant: str = "power",
    gram: str = "no",
) -> SampleCost:
    """The n-dependent cost of a Q-α fit (Wolf & Shashua, Def. 2–6, 14).

    Each α-step sums ``A_α = Σ_b M_bᵀ diag(α_b) M_b`` (n × n, ``2·p·n²`` flop) and finds α
    from W (p × r, r = nk): from its r × r Gram (``2·p·r²`` to sum it, ``4·r³`` for its
    leading eigenvector) when that is taken — or the QR of W (``4·p²·r``) when p < r and
    X is held, whichever is less — else by Lanczos (~20 products of ``2·p·r`` each).  Ritz takes two α-steps per iteration; the fit at most
    ``n_init · max_iter`` iterations and the first A_α of ``init="pca"``.  The kernel form
    (Def. 14) keeps no n × n matrix: ``4·p²·n`` flop per iteration for its feature kernel.

    Parameters
    ----------
    n, p : int, samples and features
    k : int, Q's columns
    copies : int, n × n arrays alive while A_α is tree-summed
    max_iter, n_init : int, the loop's bounds
    variant : str, the scheme (``"kernel"``, ``"ritz"``, …)
    gram : {"no", "fits", "forced"}
        Whether α comes from the Gram of W: not, because it fits the budget (``auto``: its
        work counts, its memory stays within the budget by that rule), or because
        ``alpha_solver="gram"`` asked for it (its ``copies · k²`` n × n arrays count too).

    Returns
    -------
    SampleCost
    """
    iterations = max_iter * n_init
    if variant == "kernel":
        return SampleCost(n, p, "", 0, 4.0 * p * p * n * iterations)
    r = float(n * k)
    w_part = 2.0 * p * r * r + 4.0 * r**3 if gram != "no" else 2.0 * p * r * 40
    if gram == "fits" and p < r:  # X held in memory: the QR of W (p × r), no r × r eigh
        w_part = min(w_part, 4.0 * p * p * r)
    steps = iterations * (2 if variant == "ritz" else 1) + 1
    flop = (2.0 * p * n * n + w_part) * steps
    if gram == "forced":
        what = "sample affinity A_α and the Gram of W (nk × nk), on their tree-sums"
        return SampleCost(n, p, what, copies * (1 + k * k), flop)
    return SampleCost(n, p, "sample affinity A_α on its tree-sum", copies, flop)


def logo_cost(n: int, p: int, *, copies: int, max_iter: int) -> SampleCost:
    """The n-dependent cost of a Logo fit (Sun et al., Algorithm 1).

    Each outer iteration sums the weighted Manhattan distances ``D = Σ_j w_j |x_nj − x_ij|``
    (N × N, ``3·N²·J`` flop) and ``z̄_n(j) = Σ_i Π_ni |x_nj − x_ij|`` (``3·N²·J``); elimination
    shrinks J, so ``max_iter`` iterations on every feature bound the work.

    Parameters
    ----------
    n, p : int, samples N and features J
    copies : int, N × N arrays alive at the peak (D on its tree-sum, the KKT bound)
    max_iter : int, outer iterations at most

    Returns
    -------
    SampleCost
    """
    flop = 6.0 * n * n * p * max_iter
    return SampleCost(
        n, p, "distances D, Π and KKT bounds (D on its tree-sum)", copies, flop, "absdiff"
    )


def laplacian_cost(n: int, p: int, *, copies: int) -> SampleCost:
    """The n-dependent cost of the Laplacian score (He, Cai & Niyogi 2005).

    The squared distances come from the Gram of the samples (``2·n²·p`` flop), the scores
    from ``L f`` for every feature (``2·n²·p``): two passes over X, no iteration.

    Parameters
    ----------
    n, p : int, samples and features
    copies : int, n × n arrays alive at the peak (the distances on their tree-sum)

    Returns
    -------
    SampleCost
    """
    return SampleCost(n, p, "squared distances and kNN graph", copies, 4.0 * n * n * p)


# --------------------------------------------------------------------------- the subsample
@dataclasses.dataclass(frozen=True)
class Subsample:
    """The rows a fit uses: what :func:`subsample` chose and how.

    Attributes
    ----------
    rows : ndarray of int64
        Row indices into X, increasing.
    n_total : int
        The rows of X.
    max_samples : int
        The limit asked for.
    seed : int
        The seed of the draw (``random_state``, or the one drawn when it is None).
    stratified : bool
        Whether the rows were drawn per class of y.
    """

    rows: np.ndarray
    n_total: int
    max_samples: int
    seed: int
    stratified: bool

    @property
    def digest(self) -> str:
        """SHA-256 of the rows as little-endian int64: ties a result to its rows."""
        return hashlib.sha256(np.asarray(self.rows, "<i8").tobytes()).hexdigest()

    @property
    def attrs(self) -> dict[str, Any]:
        """The provenance a result records (``result_.attrs``)."""
        return {
            "max_samples": int(self.max_samples),
            "n_samples_total": int(self.n_total),
            "n_samples_used": int(self.rows.size),
            "subsample_seed": int(self.seed),
            "subsample_stratified": bool(self.stratified),
            "subsample_rows_sha256": self.digest,
        }


def subsample(
    n: int,
    max_samples: int,
    *,
    labels: np.ndarray | None = None,
    random_state: int | None = 0,
    min_per_class: int = 1,
) -> Subsample:
    """At most ``max_samples`` of ``n`` rows, seeded and, with labels, stratified by class.

    Each class keeps its share of the rows (largest remainders), and at least
    ``min_per_class`` rows (all of a smaller class); the rows of each class are drawn
    without replacement by ``numpy.random.default_rng(seed)``, classes in sorted order, so
    the same arguments give the same rows.

    Parameters
    ----------
    n : int
        Rows of X.
    max_samples : int
        Rows to keep at most (all ``n`` when ``n ≤ max_samples``).
    labels : ndarray (n,), optional
        Classes to stratify by; None draws uniformly.
    random_state : int or None
        The seed; None draws one (recorded in :attr:`Subsample.seed`).
    min_per_class : int
        Rows every class keeps at least (Logo: 2, a nearest hit for every sample).

    Returns
    -------
    Subsample

    Raises
    ------
    ParameterError
        ``max_samples`` cannot keep ``min_per_class`` rows of every class.

    Examples
    --------
    >>> s = subsample(10, 4, labels=np.array([0] * 8 + [1] * 2), random_state=0)
    >>> s.rows.size, s.stratified
    (4, True)
    """
    seed = int(np.random.SeedSequence().entropy % 2**32) if random_state is None else random_state
    rng = np.random.default_rng(seed)
    if n <= max_samples:
        return Subsample(np.arange(n, dtype=np.int64), n, max_samples, seed, labels is not None)
    if labels is None:
        rows = np.sort(rng.choice(n, max_samples, replace=False))
        return Subsample(rows.astype(np.int64), n, max_samples, seed, False)
    classes, codes, counts = class_counts(np.asarray(labels).ravel())
    quota = class_quota(counts, max_samples, min_per_class, classes)
    picked = [
        rng.choice(np.flatnonzero(codes == c), quota[c], replace=False) for c in range(classes.size)
    ]
    rows = np.sort(np.concatenate(picked)).astype(np.int64)
    return Subsample(rows, n, max_samples, seed, True)


def class_quota(
    counts: np.ndarray, total: int, min_per_class: int = 1, classes: Any = None
) -> np.ndarray:
    """Rows per class: ``total`` shared in proportion to ``counts``, each at least
    ``min(count, min_per_class)`` and at most its count (largest-remainder rounding).

    Parameters
    ----------
    counts : ndarray of int, the rows of each class
    total : int, rows to share (< counts.sum())
    min_per_class : int
    classes : array, optional, the class names (for the message)

    Returns
    -------
    ndarray of int, summing to ``total``

    Raises
    ------
    ParameterError
        ``total`` is below what every class must keep.
    """
    counts = np.asarray(counts, dtype=np.int64)
    floor = np.minimum(counts, min_per_class)
    if floor.sum() > total:
        need = int(floor.sum())
        raise ParameterError(
            f"max_samples={total} cannot keep {min_per_class} sample(s) of each of the "
            f"{counts.size} classes of y ({need} in all, a class would vanish); use "
            f"max_samples ≥ {need}"
        )
    ideal = total * counts / counts.sum()
    quota = np.clip(np.floor(ideal).astype(np.int64), floor, counts)
    while quota.sum() < total:  # the largest remainders first, where a class has rows left
        gap = np.where(quota < counts, ideal - quota, -np.inf)
        quota[int(np.argmax(gap))] += 1
    while quota.sum() > total:  # the floors took rows: give back where most above its share
        over = np.where(quota > floor, quota - ideal, -np.inf)
        quota[int(np.argmax(over))] -= 1
    return quota


class SampleLimit:
    """The ``max_samples`` part of the estimators quadratic in n (a mixin before Selector).

    The estimator declares ``max_samples`` and ``random_state`` parameters, implements
    :meth:`_sample_cost` and, when it uses classes, :meth:`_strata`.  Before X is read, the
    cost of the samples it will use is checked against the memory budget and logged; the
    rows are drawn before the screen of constant features (a feature constant on the rows
    kept is constant for the fit) and recorded in ``result_.attrs``.
    """

    #: rows every class keeps at least in a stratified subsample
    min_per_class = 1

    def _sample_cost(self, n: int, p: int) -> SampleCost:  # pragma: no cover - abstract
        raise NotImplementedError

    def _strata(self, y: np.ndarray | None) -> np.ndarray | None:
        """The labels to stratify by (None: uniform rows)."""
        return None

    def _samples_used(self, n: int) -> int:
        limit = getattr(self, "max_samples", None)
        return n if limit is None else min(n, int(limit))

    def _check_shape(self, n: int, p: int) -> None:
        """Refuse, or announce, the n-dependent cost of the samples the fit will use."""
        self._check_sample_matrices(self._sample_cost(self._samples_used(n), p))

    def _screen_and_fit(self, Xd, y, names, ctx):
        limit = getattr(self, "max_samples", None)
        if limit is None:
            return super()._screen_and_fit(Xd, y, names, ctx)
        n = Xd.shape[0]
        sub = subsample(
            n,
            int(limit),
            labels=self._strata(y),
            random_state=getattr(self, "random_state", 0),
            min_per_class=self.min_per_class,
        )
        if sub.rows.size < n:
            progress_line(
                f"{getattr(self, 'method_name', type(self).__name__)}: fitting on "
                f"{sub.rows.size} of {n} samples (max_samples={limit}, "
                f"{'stratified by class' if sub.stratified else 'uniform'}, seed {sub.seed})"
            )
            Xd = Xd[sub.rows]
            y = None if y is None else y[sub.rows]
        out, active = super()._screen_and_fit(Xd, y, names, ctx)
        out.attrs.update(sub.attrs)
        return out, active


def with_max_samples(estimator: Any, max_samples: int | None) -> Any:
    """``estimator`` with ``max_samples`` set (``fsdask select --max-samples N``).

    Parameters
    ----------
    estimator : Selector
        An unfitted estimator.
    max_samples : int or None
        None leaves the estimator as it is.

    Returns
    -------
    Selector
        The same estimator.

    Raises
    ------
    ParameterError
        The method is not quadratic in the samples (it has no ``max_samples``).
    """
    if max_samples is None:
        return estimator
    if "max_samples" not in estimator.get_params():
        raise ParameterError(
            f"--max-samples applies to the methods quadratic in the samples (qalpha, logo, "
            f"laplacian_score); {getattr(estimator, 'method_name', type(estimator).__name__)} "
            "reads every sample in passes linear in their number: drop --max-samples"
        )
    return estimator.set_params(max_samples=max_samples)
