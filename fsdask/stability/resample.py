"""The resamples of stability selection and the error bounds that go with them.

Meinshausen & Bühlmann (2010) refit a selector on B random subsamples of half the samples
and keep the features selected in at least a fraction τ of them; Shah & Samworth (2013)
draw the subsamples in complementary pairs (each half and its complement) and prove the
bound without Meinshausen & Bühlmann's exchangeability assumption.  Everything here is
small (index arrays of n, frequencies of p) and computed on the client.
"""

from __future__ import annotations

import math

import numba
import numpy as np
import scipy.stats

from fsdask.errors import InputError, ParameterError


def draw_subsamples(
    n: int,
    n_resamples: int,
    *,
    sample_fraction: float = 0.5,
    complementary_pairs: bool = True,
    strata: np.ndarray | None = None,
    min_per_stratum: int = 1,
    random_state: int | None = 0,
) -> list[np.ndarray]:
    """The sample indices of each resample, sorted, drawn from one seed.

    Parameters
    ----------
    n : int
        Samples in the data.
    n_resamples : int
        Subsamples in all; with ``complementary_pairs`` an even number: subsample 2b + 1 is
        the complement of subsample 2b (Shah & Samworth's B = n_resamples / 2 pairs).
    sample_fraction : float in (0, 1)
        Fraction of the samples in each subsample (0.5 with complementary pairs: the pair
        splits the samples in two halves of ⌊n/2⌋ and the rest).
    complementary_pairs : bool
        Draw pairs of disjoint halves.
    strata : int ndarray (n,), optional
        Class codes: each subsample takes the fraction from every class separately, so
        every class appears in every subsample (a two-class statistic needs both).
    min_per_stratum : int
        The fewest samples of a class (or, without strata, in all) a subsample may have:
        fewer is refused (a t-test needs 2 per class).
    random_state : int or None
        The seed; the same seed gives the same subsamples on every machine.

    Returns
    -------
    list of int ndarray
        ``n_resamples`` sorted index arrays.  Memory: n_resamples × n/2 integers.
    """
    if complementary_pairs:
        _check_pairs(n_resamples, sample_fraction)
    rng = np.random.default_rng(random_state)
    groups = (
        [np.arange(n)]
        if strata is None
        else [np.flatnonzero(strata == c) for c in np.unique(strata)]
    )
    least = max(2, min_per_stratum) if strata is None else min_per_stratum
    _check_strata(groups, sample_fraction, complementary_pairs, strata is not None, least)
    step = 2 if complementary_pairs else 1
    out: list[np.ndarray] = []
    for _ in range(0, n_resamples, step):
        first, second = [], []
        for g in groups:
            perm = rng.permutation(g)
            m = int(math.floor(sample_fraction * g.size))
            first.append(perm[:m])
            second.append(perm[m:])
        out.append(np.sort(np.concatenate(first)))
        if complementary_pairs:
            out.append(np.sort(np.concatenate(second)))
    return out


def _check_pairs(n_resamples: int, sample_fraction: float) -> None:
    """Complementary pairs need an even number of halves."""
    if n_resamples % 2:
        raise ParameterError(
            f"n_resamples={n_resamples} must be even with complementary_pairs=True "
            "(each subsample comes with its complement)"
        )
    if sample_fraction != 0.5:
        raise ParameterError(
            f"sample_fraction={sample_fraction} must be 0.5 with complementary_pairs=True "
            "(a subsample and its complement split the samples in halves)"
        )


def _check_strata(
    groups: list[np.ndarray], fraction: float, pairs: bool, by_class: bool, need: int
) -> None:
    """Refuse subsamples with fewer than ``need`` samples of a class (or in all)."""
    for g in groups:
        m = int(math.floor(fraction * g.size))
        least = min(m, g.size - m) if pairs else m
        if least < need:
            what = "a class" if by_class else "the data"
            raise InputError(
                f"a subsample of {fraction:g} of {what} ({g.size} samples) has {least} "
                f"sample(s); stability selection needs at least {need} per subsample"
                + (" and class" if by_class else "")
                + " (more samples, or a larger sample_fraction without complementary pairs)"
            )


def frequency_interval(
    counts: np.ndarray, n_resamples: int, level: float = 0.95
) -> tuple[np.ndarray, np.ndarray]:
    """Wilson score interval of each feature's selection frequency.

    The subsamples of one seed are not independent (complementary halves share the data),
    so the interval describes the resampling error of the frequency estimate, not the
    sampling error of the selection probability.

    Parameters
    ----------
    counts : int ndarray (p,)
        How many resamples selected each feature.
    n_resamples : int
    level : float
        Coverage of the interval.

    Returns
    -------
    (low, high) : float ndarrays (p,).  Memory: a few arrays of p.
    """
    z = scipy.stats.norm.ppf(0.5 + level / 2)
    f = np.asarray(counts, dtype=np.float64) / n_resamples
    den = 1 + z**2 / n_resamples
    mid = (f + z**2 / (2 * n_resamples)) / den
    half = z * np.sqrt(f * (1 - f) / n_resamples + z**2 / (4 * n_resamples**2)) / den
    # the interval holds f; clipping keeps rounding from putting f outside it
    return np.clip(np.minimum(mid - half, f), 0, 1), np.clip(np.maximum(mid + half, f), 0, 1)


def error_bound(mean_selected: float, n_features: int, threshold: float) -> float:
    """The bound on the expected number of falsely selected features, q² / ((2τ − 1) p).

    Meinshausen & Bühlmann (2010, Theorem 1) bound the expected number of noise features
    in the stable set by this when the noise features are exchangeable and the selector is
    no worse than random guessing; Shah & Samworth (2013, Theorem 1) prove the same bound
    for complementary pairs without those assumptions, for the features whose selection
    probability on half the data is at most q / p ("low-probability" features).

    Parameters
    ----------
    mean_selected : float
        q: the mean number of features a subsample's fit selects.
    n_features : int
        p.
    threshold : float
        τ; the bound exists for τ > 1/2.

    Returns
    -------
    float
        The bound; ``inf`` for τ ≤ 1/2.
    """
    if threshold <= 0.5:
        return math.inf
    return float(mean_selected**2 / ((2 * threshold - 1) * n_features))


def stability_path(frequency: np.ndarray, thresholds: np.ndarray) -> np.ndarray:
    """How many features reach each threshold: the stable set's size along τ.

    Parameters
    ----------
    frequency : float ndarray (p,)
    thresholds : float ndarray (t,)

    Returns
    -------
    int ndarray (t,)
    """
    f = np.sort(np.asarray(frequency, dtype=np.float64))
    return f.size - np.searchsorted(f, np.asarray(thresholds, dtype=np.float64), side="left")


def top_k_rows(scores: np.ndarray, k: int) -> np.ndarray:
    """Each row's k highest scores, ties broken by feature order and a NaN never chosen
    (below k chosen when a row holds fewer than k numbers): ``fsdask.base.top_k_mask`` of
    every row at once (one partition of the (R, p) array).

    Parameters
    ----------
    scores : ndarray (R, p)
    k : int

    Returns
    -------
    bool ndarray (R, p).  Memory: two float and a few bool copies of ``scores``.
    """
    R, p = scores.shape
    if k >= p:
        return np.ones((R, p), bool)
    neg = np.negative(scores)  # partitioned ascending, a NaN last: it is never the k-th
    kth = np.partition(neg, k - 1, axis=1)[:, k - 1 : k]  # minus each row's k-th largest
    mask = neg < kth
    ties = neg == kth
    room = k - mask.sum(axis=1)  # tied scores each row still takes
    for i in np.flatnonzero(ties.sum(axis=1) > room):  # rows with ties at the k-th: few
        ties[i, np.flatnonzero(ties[i])[room[i] :]] = False  # keep the first, in feature order
    return mask | ties


class RunningTopK:
    """Each row's top k of scores that arrive in column slices, in feature order: ties go
    to the first feature and a NaN is never kept (the rule of :func:`top_k_rows`).

    Each score is compared once with its row's current k-th score; the few that pass
    replace the kept score that would be chosen last (the lowest, the latest feature among
    equal ones), so a block's top k cost one compiled pass over its scores.

    Parameters
    ----------
    rows : int, R
    k : int

    Attributes
    ----------
    values : ndarray (R, k), the kept scores of each row in feature order (NaN: none yet)
    index : int ndarray (R, k), their columns (−1: none)
    """

    def __init__(self, rows: int, k: int):
        self.k = int(k)
        self._values = np.full((rows, self.k), np.nan)
        self._index = np.full((rows, self.k), -1, dtype=np.int64)
        self._count = np.zeros(rows, dtype=np.int64)

    def add(self, scores: np.ndarray, first: int) -> None:
        """Offer the (R, w) ``scores`` of columns ``first`` … ``first + w − 1`` (after every
        column offered before)."""
        if self.k:
            scores = np.ascontiguousarray(scores, dtype=np.float64)
            _offer(scores, int(first), self._values, self._index, self._count)

    @property
    def values(self) -> np.ndarray:
        return np.take_along_axis(self._values, self._order(), axis=1)

    @property
    def index(self) -> np.ndarray:
        return np.take_along_axis(self._index, self._order(), axis=1)

    def _order(self) -> np.ndarray:
        """Kept entries by feature, the empty places (−1) last."""
        key = np.where(self._index < 0, np.iinfo(np.int64).max, self._index)
        return np.argsort(key, axis=1, kind="stable")


@numba.njit(nogil=True, cache=True)
def _offer(scores, first, values, index, count):  # pragma: no cover - numba
    """:meth:`RunningTopK.add`: each row's kept scores, in no order, updated in place."""
    R, w = scores.shape
    k = values.shape[1]
    for r in range(R):
        n = count[r]
        worst = _worst(values[r], index[r], n) if n == k else 0
        for c in range(w):
            s = scores[r, c]
            if s != s:  # NaN: never kept
                continue
            if n < k:
                values[r, n], index[r, n] = s, first + c
                n += 1
                if n == k:
                    worst = _worst(values[r], index[r], n)
            elif s > values[r, worst]:  # an equal score has an earlier feature: it stays
                values[r, worst], index[r, worst] = s, first + c
                worst = _worst(values[r], index[r], n)
        count[r] = n


@numba.njit(nogil=True, cache=True, inline="always")
def _worst(values, index, n):  # pragma: no cover - numba
    """The kept entry chosen last: the lowest score, the latest feature among equal ones."""
    at = 0
    for t in range(1, n):
        if values[t] < values[at] or (values[t] == values[at] and index[t] > index[at]):
            at = t
    return at
