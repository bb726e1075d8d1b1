"""Every resample of a univariate filter from one pass over X.

A filter's statistic needs only class-wise counts, sums and sums of squares, and those of
a subset of the samples are a 0/1-weighted sum over the samples.  So every block X_b (any
layout: sample or feature blocks, NumPy or CSR) gives the partial sums of every variant —
each resample of the samples, each permutation of the labels — at once, as two matrix
products with the membership matrix M (V·C × n_b: 1 where sample i is in variant v with
class c): ``M (X_b − K)`` and ``M (X_b − K)²``
(:func:`fsdask.linalg.colstats.membership_sums`).  The partials are merged over sample
blocks like the Filter's own (:meth:`fsdask.linalg.execution.Execution.sum_blocks`), and
:func:`fsdask.methods.filters.stats_from_moments` turns every variant's moments into its
statistics in one call.  X is read once whatever the number of variants, and a variant's
scores are those of a :class:`~fsdask.methods.filters.Filter` fitted on it, to rounding.

``ks`` sorts each feature's values, so it has no such sums: its block function
(:func:`variants_block`) runs the filter's kernel on each variant of a feature block
(:meth:`fsdask.base.Selector.fit` hands it feature blocks).
"""

from __future__ import annotations

import dataclasses
import functools

import numpy as np

from fsdask.linalg import map_features
from fsdask.linalg.colstats import MOMENT_MAXIMA, membership_rows, membership_sums
from fsdask.linalg.moments import moments_from_sums
from fsdask.methods.filters import (
    CLASS_SCORES,
    Filter,
    fold_change_scores,
    scores_from_stats,
    stats_block,
    stats_from_moments,
)

#: bytes of one column group's merged sums and moments on the client (see
#: :func:`variant_scores`); the memory budget, when set, caps it at a quarter of it
GROUP_BYTES = 256 * 2**20
#: float64 rows per feature a column group holds beyond its sums (means, variances,
#: their temporaries, the statistics), in units of V·C
GROUP_WORK_ROWS = 5


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


def membership(
    variants: list[Variant], n: int, n_classes: int
) -> tuple[np.ndarray, np.ndarray | None, np.ndarray, np.ndarray | None]:
    """Which samples each variant holds, in which class, with which response weight.

    Parameters
    ----------
    variants : list of V Variant (rows distinct within a variant)
    n : int, samples
    n_classes : int, C (1 for the statistics without classes)

    Returns
    -------
    member : int ndarray (n, V), the class code of sample i in variant v (0 without
        classes), −1 where it is not in v; int8 for fewer than 128 classes
    weights : float ndarray (n, V) or None, the centred response (pearson), 0 where absent
    counts : float ndarray (V, C), samples of each class in each variant
    yy : float ndarray (V,) or None, Σ yc² of each variant (pearson)

    Memory: n × V bytes (int8), and n × V float64 for pearson.
    """
    dtype = np.int8 if n_classes < 128 else np.int32
    member = np.full((n, len(variants)), -1, dtype=dtype)
    pearson = any(v.yc is not None for v in variants)
    weights = np.zeros((n, len(variants))) if pearson else None
    yy = np.zeros(len(variants)) if pearson else None
    for k, v in enumerate(variants):
        sel = slice(None) if v.rows is None else v.rows
        member[sel, k] = 0 if v.codes is None else v.codes
        if weights is not None:
            weights[sel, k] = v.yc
            yy[k] = (v.yc * v.yc).sum()
    counts = np.stack([np.bincount(col[col >= 0], minlength=n_classes) for col in member.T]).astype(
        np.float64
    )
    return member, weights, counts, yy


def column_groups(chunks: tuple[int, ...], width: int) -> list[tuple[int, int]]:
    """Consecutive feature blocks joined into groups of at most ``width`` columns (a wider
    block is a group of its own): the column ranges of :func:`variant_scores`."""
    groups, start, end = [], 0, 0
    for c in chunks:
        if end > start and end + c - start > width:
            groups.append((start, end))
            start = end
        end += c
    if end > start:
        groups.append((start, end))
    return groups


def variant_scores(
    ex, X, est: Filter, variants: list[Variant], n_classes: int
) -> tuple[np.ndarray, np.ndarray]:
    """Every variant's scores from one pass over X (any layout), and X's screen.

    Parameters
    ----------
    ex : Execution, the fit's (the pass is counted there once)
    X : dask array (n, p), sample or feature blocks, NumPy or CSR
    est : Filter, whose statistic, ``equal_var`` and ``log_scale`` are used (not ``ks``)
    variants : list of V Variant
    n_classes : int, C (0 for the statistics without classes)

    Returns
    -------
    computed : ndarray (V · r, p), float64, r = :func:`variant_rows`: per variant its score
        row (or its two class means); for :func:`finish_scores`
    screen : ndarray (3, p), NaN/Inf count, minimum, maximum of every feature

    Memory: per block M (V·C × n_b) and V·(2·C + 1) + 4 partial sums per feature; on the
    client the result and, for one group of feature blocks at a time (at most
    :data:`GROUP_BYTES`, or a quarter of the memory budget), its sums and moments.
    Work: 4·V·C·n·p flop in BLAS products.
    """
    n, p = X.shape
    C = max(n_classes, 1)
    member, weights, counts, yy = membership(variants, n, C)
    V, r = len(variants), variant_rows(est)
    rows = membership_rows(V, C)
    cap = GROUP_BYTES if not ex.budget else min(GROUP_BYTES, ex.budget // 4)
    width = max(1, int(cap // (8 * (rows + GROUP_WORK_ROWS * V * C))))
    shift = ex.first_row(X)
    row_args = (member,) if weights is None else (member, weights)
    fn = functools.partial(_membership_block, n_classes=C, has_w=weights is not None)
    computed, screen = np.empty((V * r, p)), np.empty((3, p))
    before = ex.passes
    for j0, j1 in column_groups(X.chunks[1], width):
        cols = () if shift is None else (shift[j0:j1],)
        sums = ex.sum_blocks(
            fn, X[:, j0:j1], *row_args, shape=(rows,), maxima=MOMENT_MAXIMA, columns=cols
        )
        m = moments_from_sums(sums, counts, C)
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            st = stats_from_moments(m, est.statistic, n_classes, est.equal_var, yy)
            if r == 1:  # the scores, variant by variant (rows of the statistics first)
                st = scores_from_stats(est.statistic, np.moveaxis(st, -2, 0), bool(est.log_scale))
        computed[:, j0:j1] = st.reshape(V * r, j1 - j0)
        screen[:, j0:j1] = m.screen
    ex.passes = before + 1  # the groups read disjoint columns of X: together one pass
    return computed, screen


def _membership_block(xb, member, *rest, n_classes, has_w):
    """:func:`membership_sums` of one block, its optional weights and column shift unpacked."""
    weights = rest[0] if has_w else None
    shift = rest[-1] if len(rest) > int(has_w) else None
    return membership_sums(xb, member, weights, shift, n_classes=n_classes)


def variants_block(
    xb: np.ndarray, est: Filter, variants: list[Variant], n_classes: int
) -> np.ndarray:
    """The scores of one feature block under every variant, then the screen rows: the
    route of ``ks``, whose statistic is not a function of sums.

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
