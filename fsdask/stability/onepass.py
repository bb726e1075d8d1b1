"""Every resample of a univariate filter from one pass over X.

A filter's statistic of a feature needs only that feature's column, so each feature block
(all samples) gives the statistic on every resample at once: the block function runs the
filter's own block kernel (:func:`fsdask.methods.filters.stats_block`) on each resample's
rows (or with each permutation of the labels) while the block is in memory.  X is read
once whatever the number of resamples, and a resample's scores are those of a
:class:`~fsdask.methods.filters.Filter` fitted on that resample (to rounding: the Filter
itself streams class-wise sums over sample blocks).  The kernel needs feature blocks, so a
sample-blocked source is converted to them first (:meth:`fsdask.base.Selector.fit`).
"""

from __future__ import annotations

import dataclasses

import numpy as np

from fsdask.linalg import map_features
from fsdask.methods.filters import (
    CLASS_SCORES,
    Filter,
    fold_change_scores,
    scores_from_stats,
    stats_block,
)


@dataclasses.dataclass(frozen=True)
class Variant:
    """One resample of the data as a filter sees it.

    Attributes
    ----------
    rows : int ndarray or None
        The samples (None: all, in order).
    codes : int ndarray or None
        Class codes of those samples (class statistics), possibly permuted.
    yc : float ndarray or None
        The centred response of those samples (pearson), possibly permuted.
    """

    rows: np.ndarray | None
    codes: np.ndarray | None
    yc: np.ndarray | None


def filter_variants(
    est: Filter, y: np.ndarray | None, rows: list[np.ndarray | None], labels: list[np.ndarray]
) -> tuple[list[Variant], int]:
    """The variants of a filter's input: one per subsample in ``rows`` (labels as given) and
    one per label order in ``labels`` (all samples, y permuted by it).

    Parameters
    ----------
    est : Filter
    y : ndarray (n,) or None
    rows : list of index arrays (or None for all samples)
    labels : list of permutations of range(n)

    Returns
    -------
    (list of Variant, number of classes)
    """
    codes, n_classes, yv = None, 0, None
    if est.statistic in CLASS_SCORES:
        classes, codes = np.unique(y, return_inverse=True)
        n_classes = classes.size
    elif est.statistic == "pearson":
        yv = np.asarray(y, dtype=np.float64)

    def variant(r, order):
        sel = slice(None) if r is None else r
        c = None if codes is None else codes[order][sel]
        yc = None if yv is None else yv[order][sel] - yv[order][sel].mean()
        return Variant(r, c, yc)

    ident = np.arange(0 if y is None else len(y))
    out = [variant(r, ident) for r in rows] + [variant(None, perm) for perm in labels]
    return out, n_classes


def variant_rows(est: Filter) -> int:
    """Rows per variant the block function returns: the score, or (fold_change with
    ``log_scale="auto"``, decided from the data's minimum after the pass) the two class means."""
    return 2 if est.statistic == "fold_change" and est.log_scale == "auto" else 1


def variants_block(
    xb: np.ndarray, est: Filter, variants: list[Variant], n_classes: int
) -> np.ndarray:
    """The scores of one feature block under every variant, then the screen rows.

    Parameters
    ----------
    xb : ndarray (n, p_b)
    est : Filter, whose statistic, ``equal_var`` and ``log_scale`` are used
    variants : list of Variant
    n_classes : int

    Returns
    -------
    ndarray (V · r + 3, p_b), float64, r = :func:`variant_rows`: per variant its score row
    (or its two class means), then the block's NaN/Inf count, minimum and maximum.
    Memory: a copy of the block's rows of one subsample at a time.
    """
    r = variant_rows(est)
    out = np.empty((len(variants) * r + 3, xb.shape[1]))
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        for i, v in enumerate(variants):
            sub = xb if v.rows is None else xb[v.rows]
            st = stats_block(sub, est.statistic, v.codes, n_classes, v.yc, est.equal_var)
            out[i * r : (i + 1) * r] = (
                st if r == 2 else scores_from_stats(est.statistic, st, bool(est.log_scale))
            )
    out[-3] = (~np.isfinite(xb)).sum(0)
    out[-2] = xb.min(0)
    out[-1] = xb.max(0)
    return out


def lazy_variant_scores(X, est: Filter, variants: list[Variant], n_classes: int):
    """The lazy (V · r + 3, p) array of :func:`variants_block` over X's feature blocks."""
    return map_features(
        variants_block,
        X,
        out_rows=len(variants) * variant_rows(est) + 3,
        dtype=np.float64,
        est=est,
        variants=variants,
        n_classes=n_classes,
    )


def finish_scores(
    computed: np.ndarray, est: Filter, n_variants: int, data_min: float
) -> np.ndarray:
    """The (V, p) scores from the computed rows of :func:`lazy_variant_scores` (screen rows
    removed); fold_change with ``log_scale="auto"`` is decided by ``data_min`` as in Filter."""
    if variant_rows(est) == 1:
        return computed[:n_variants]
    m = computed[: 2 * n_variants].reshape(n_variants, 2, -1)
    return fold_change_scores(m[:, 0], m[:, 1], bool(data_min <= 0))
