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
import operator

import numpy as np

from fsdask._validation import class_codes
from fsdask.linalg import map_features
from fsdask.linalg.colstats import (
    MOMENT_MAXIMA,
    membership_rows,
    membership_sums,
    merged_screen,
)
from fsdask.linalg.moments import moments_from_sums, two_class_scores
from fsdask.linalg.reductions import sum_over_row_blocks
from fsdask.methods.filters import (
    CLASS_SCORES,
    Filter,
    fold_change_scores,
    scores_from_stats,
    stats_block,
    stats_from_moments,
)
from fsdask.stability.resample import RunningTopK

#: bytes of a task's partial sums over sample blocks — a tree node's ``TREE_SPLIT`` inputs
#: and its output — (capped by the memory budget): wider feature blocks are split for them
SUMS_BYTES = 512 * 2**20
#: partial sums merged per node of the tree sum over sample blocks
TREE_SPLIT = 8
#: statistics of two classes whose scores come from one compiled sweep over the sums
TWO_CLASS_FUSED = ("ttest", "snr")
#: bytes of one (V·C × w) float64 array of the statistics' arithmetic: the sums are turned
#: into scores in slices of w columns, so a dozen such temporaries stay in the CPU's cache
SLICE_BYTES = 2 * 2**20


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
        classes, codes = class_codes(np.asarray(y))
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
) -> tuple[np.ndarray, np.ndarray | None, np.ndarray | None]:
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
    return member, weights, yy


def variant_counts(variants: list[Variant], n: int, n_classes: int) -> np.ndarray:
    """The samples of each class in each variant, float (V, C)."""
    return np.stack(
        [
            np.bincount(v.codes, minlength=n_classes)
            if v.codes is not None
            else [n if v.rows is None else v.rows.size]
            for v in variants
        ]
    ).astype(np.float64)


def split_blocks(chunks: tuple[int, ...], width: int) -> tuple[int, ...]:
    """Feature blocks split into pieces of at most ``width`` columns (never merged: a CSR
    block is split by slicing, and every stored block is still read once)."""
    width = max(1, int(width))
    out: list[int] = []
    for c in chunks:
        out += [width] * (c // width) + ([c % width] if c % width else [])
    return tuple(out)


def complements(variants: list[Variant], n: int) -> dict[int, tuple[int, int]]:
    """The variants whose sums are those of all samples minus another variant's.

    Complementary pairs (Shah & Samworth) split the samples into a half and the rest: the
    rest's class sums and sums of squares are the full data's minus the half's, so only
    the half needs a membership product.  Variant k is derived when the variant before it
    holds the other samples, both with the labels of the first all-sample variant f, and
    no response weights (a Pearson variant centres y within itself).

    Returns
    -------
    dict k -> (f, j): variant k's sums are variant f's minus variant j's.
    """
    full = next((i for i, v in enumerate(variants) if v.rows is None), None)
    if full is None or variants[full].yc is not None:
        return {}
    codes = variants[full].codes
    out: dict[int, tuple[int, int]] = {}
    for k in range(1, len(variants)):
        a, b = variants[k - 1], variants[k]
        if k - 1 in out or a.rows is None or b.rows is None or a.rows.size + b.rows.size != n:
            continue
        same_labels = codes is None or (
            np.array_equal(a.codes, codes[a.rows]) and np.array_equal(b.codes, codes[b.rows])
        )
        if same_labels and np.union1d(a.rows, b.rows).size == n:
            out[k] = (full, k - 1)
    return out


def with_complements(
    sums: np.ndarray, base: list[int], derived: dict[int, tuple[int, int]], V: int, C: int
) -> np.ndarray:
    """The sums of all V variants from those of the ``base`` ones (no dot rows)."""
    Vb, w = len(base), sums.shape[1]
    pos = {k: i for i, k in enumerate(base)}
    out = np.empty((2 * V * C + 4, w))
    for part in range(2):  # class sums, then sums of squares
        b = sums[part * Vb * C : (part + 1) * Vb * C].reshape(Vb, C, w)
        a = out[part * V * C : (part + 1) * V * C].reshape(V, C, w)
        for k in range(V):
            if k in derived:
                np.subtract(b[pos[derived[k][0]]], b[pos[derived[k][1]]], out=a[k])
            else:
                a[k] = b[pos[k]]
    out[-4:] = sums[-4:]
    return out


def variant_scores(
    ex, X, est: Filter, variants: list[Variant], n_classes: int
) -> tuple[np.ndarray, np.ndarray]:
    """Every variant's scores from one pass over X (any layout), and X's screen.

    Parameters
    ----------
    ex : Execution, the fit's (the pass is counted there)
    X : dask array (n, p), sample or feature blocks, NumPy or CSR
    est : Filter, whose statistic, ``equal_var`` and ``log_scale`` are used (not ``ks``)
    variants : list of V Variant
    n_classes : int, C (0 for the statistics without classes)

    Returns
    -------
    computed : ndarray (V · r, p), float64, r = :func:`variant_rows`: per variant its score
        row (or its two class means); for :func:`finish_scores`
    screen : ndarray (3, p), NaN/Inf count, minimum, maximum of every feature

    Memory: per block M (V_b·C × n_b) and about 2·V_b·C partial sums per feature (V_b: the
    variants not derived as :func:`complements`, about V/2 with complementary pairs) —
    with sample blocks, those of a tree node (:data:`TREE_SPLIT` + 1 of them) within
    :data:`SUMS_BYTES` (wider feature blocks are split) —, turned into the block's scores
    :data:`SLICE_BYTES` at a time; on the client the result, (V · r + 3) × p float64.
    Work: 4·V_b·C·n·p flop in BLAS products.
    """
    (computed,) = ex.compute(lazy_scores(ex, X, est, variants, n_classes))
    return computed[:-3], computed[-3:]


def lazy_scores(
    ex, X, est: Filter, variants: list[Variant], n_classes: int, collect=None, out_rows=None
):
    """The lazy (V · r + 3, p) array of :func:`variant_scores`, chunked by feature blocks.

    ``collect`` (default: joined) receives a feature block's (V · r + 3, w) score slices
    and makes the block's result, of ``out_rows`` rows (default V · r + 3): a reduction
    such as :func:`slice_exceedances`, or a :func:`slice_candidates` pair (an array of
    pairs: its chunks are the feature blocks, its rows a placeholder)."""
    n = X.shape[0]
    C = max(n_classes, 1)
    V, r = len(variants), variant_rows(est)
    derived = complements(variants, n)
    base = [k for k in range(V) if k not in derived]
    member, weights, yy = membership([variants[k] for k in base], n, C)
    row_args = (member,) if weights is None else (member, weights)
    fn = functools.partial(_membership_block, n_classes=C, has_w=weights is not None)
    plan = {
        "finish": functools.partial(
            _finish_block,
            plan=(base, derived, variant_counts(variants, n, C), yy),
            est=est,
            n_classes=n_classes,
        ),
        "step": slice_width(V, C),
        "collect": _joined if collect is None else collect,
    }
    out_rows = V * r + 3 if out_rows is None else out_rows
    if len(X.chunks[0]) == 1:  # feature blocks hold every sample: sums and scores in one task
        return map_features(
            _block_scores,
            X,
            out_rows=out_rows,
            dtype=np.float64,
            meta=np.empty((0, 0)),
            rows=row_args,
            sums_of=fn,
            **plan,
        )
    rows = membership_rows(len(base), C, weights is not None)
    return _merged_then_scored(ex, X, fn, row_args, rows, out_rows, plan)


def _merged_then_scored(ex, X, fn, row_args: tuple, rows: int, out_rows: int, plan: dict):
    """Sample blocks: the membership sums ``fn`` of X's row blocks merged per feature block
    (``rows`` rows each), then each feature block's merged sums made into its scores on the
    worker, so that only the scores (``out_rows`` rows) travel to the client."""
    shift = ex.first_row(X)
    cap = SUMS_BYTES if not ex.budget else min(SUMS_BYTES, ex.budget)
    X = X.rechunk({1: split_blocks(X.chunks[1], cap // (8 * rows * (TREE_SPLIT + 1)))})
    sums = sum_over_row_blocks(
        fn,
        X,
        *row_args,
        columns=() if shift is None else (shift,),
        shape=(rows,),
        maxima=MOMENT_MAXIMA,
        split_every=TREE_SPLIT,
    )
    return sums.rechunk({0: -1}).map_blocks(  # the sums and the maxima rows joined
        _block_scores,
        chunks=((out_rows,), X.chunks[1]),
        dtype=np.float64,
        meta=np.empty((0, 0)),
        **plan,
    )


def variant_candidates(
    ex, X, est: Filter, variants: list[Variant], n_classes: int, keep: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The first variant's scores, X's screen, and every other variant's candidates for
    its top ``keep`` features, from one pass over X (any layout): the route of a selection
    of k ≤ ``keep`` features, whose scores need not reach the client.

    Parameters
    ----------
    ex, X, est, variants, n_classes : as :func:`variant_scores` (``est`` with one score
        row per variant, :func:`variant_rows`)
    keep : int, candidates of a variant in each feature block

    Returns
    -------
    head : ndarray (4, p), float64: the first variant's scores, then the screen rows
    values : ndarray (V − 1, m), float64: the candidates' scores (NaN: none), in feature
        order; m = Σ_b min(keep, p_b)
    index : int ndarray (V − 1, m): their features (−1: none)

    The top k ≤ ``keep`` of a variant's active features are the top k of its candidates
    (:func:`fsdask.stability.resample.top_k_rows`, ties to the first feature): a
    feature outside its block's top ``keep`` has ``keep`` at least as high before it.
    Memory: on the workers those of :func:`variant_scores` but a block's scores, which
    are made and ranked a slice at a time; on the client 4 × p and 2 × (V − 1) × m float64.
    """
    V = len(variants)
    collect = functools.partial(slice_candidates, n_variants=V, keep=keep)
    pairs = lazy_scores(ex, X, est, variants, n_classes, collect=collect)
    blocks = pairs.chunks[1]
    widths = tuple(min(keep, c) for c in blocks)
    part = functools.partial(pairs.map_blocks, dtype=np.float64, meta=np.empty((0, 0)))
    head, cand = ex.compute(
        part(operator.itemgetter(0), chunks=((4,), blocks)),
        part(operator.itemgetter(1), chunks=((2 * (V - 1),), widths)),
    )
    index = cand[V - 1 :].astype(np.int64)
    starts = np.repeat(np.cumsum((0, *blocks[:-1])), widths)
    return head, cand[: V - 1], np.where(index >= 0, index + starts, -1)


def variant_exceedances(
    ex, X, est: Filter, variants: list[Variant], n_classes: int
) -> tuple[np.ndarray, np.ndarray]:
    """The first variant's scores, every feature's count of other variants that score at
    least as high, and X's screen, from one pass over X (any layout): the permutation null
    of a filter (:class:`~fsdask.stability.FDR`), counted where the scores are made.

    Parameters
    ----------
    ex, X, est, variants, n_classes : as :func:`variant_scores`

    Returns
    -------
    rows : ndarray (r + e, p), float64: :func:`exceedance_rows` (for
        :func:`finish_exceedances`)
    screen : ndarray (3, p), NaN/Inf count, minimum, maximum of every feature

    Memory: on the workers those of :func:`variant_scores`, whose scores are made and
    counted a slice at a time; on the client (r + e + 3) × p float64 — not V × p.
    """
    V, r = len(variants), variant_rows(est)
    collect = functools.partial(slice_exceedances, n_variants=V, rows=r)
    lazy = lazy_scores(ex, X, est, variants, n_classes, collect=collect, out_rows=2 * r + 3)
    (computed,) = ex.compute(lazy)
    return computed[:-3], computed[-3:]


def exceedance_rows(scores: np.ndarray, n_variants: int, rows: int) -> np.ndarray:
    """The first variant's r rows, then e counts #{v ≥ 1 : score_v ≥ score_0} per feature.

    Parameters
    ----------
    scores : ndarray (V · r, w), every variant's r rows (:func:`variant_rows`)
    n_variants : int, V
    rows : int, r: 1 (a score) or 2 (fold_change with ``log_scale="auto"``: the class
        means, whose scale is decided after the pass, so both scales are counted)

    Returns
    -------
    ndarray (2 · r, w), float64: the first variant's rows, then its counts (for r = 2: on
    the log scale, then on the linear scale).  A NaN score exceeds nothing and is
    exceeded by nothing, as in :func:`fsdask.stability.permutation_pvalues`.
    """
    m = scores[: rows * n_variants].reshape(n_variants, rows, -1)
    return np.vstack([m[0], exceeded(m[0], m[1:])])


def exceeded(first: np.ndarray, others: np.ndarray) -> np.ndarray:
    """(r, w) counts #{v : score_v ≥ score_first} of ``others`` (B, r, w) against ``first``
    (r, w) — each variant's r rows (:func:`variant_rows`); for r = 2 (class means of an
    undecided fold change) on the log scale, then on the linear scale."""
    if first.shape[0] == 1:
        return (others[:, 0] >= first[0]).sum(0)[None]
    return np.vstack(
        [
            (
                fold_change_scores(others[:, 0], others[:, 1], log)
                >= fold_change_scores(*first, log)
            ).sum(0)
            for log in (True, False)
        ]
    )


def slice_exceedances(slices, n_variants: int, rows: int) -> np.ndarray:
    """A feature block's part of :func:`variant_exceedances` from its (V · r + 3, w) score
    slices: (2 · r + 3, p_b), its :func:`exceedance_rows` and screen rows."""
    return _joined(np.vstack([exceedance_rows(s[:-3], n_variants, rows), s[-3:]]) for s in slices)


def finish_exceedances(
    rows: np.ndarray, est: Filter, data_min: float
) -> tuple[np.ndarray, np.ndarray]:
    """The observed scores and their exceedance counts from :func:`exceedance_rows`;
    fold_change with ``log_scale="auto"`` is decided by ``data_min`` as in Filter (and in
    :func:`finish_scores`)."""
    if variant_rows(est) == 1:
        return rows[0], rows[1]
    log_scale = bool(data_min <= 0)
    return fold_change_scores(rows[0], rows[1], log_scale), rows[2 if log_scale else 3]


def _block_scores(block, rows: tuple = (), *, sums_of=None, finish, step: int, collect):
    """A feature block's scores (X's block with every sample: its membership sums first;
    else its merged sums), made ``step`` columns at a time while they are in the CPU's
    cache and handed to ``collect``."""
    pieces = (block[:, a : a + step] for a in range(0, block.shape[1], step))
    return collect(finish(p if sums_of is None else sums_of(p, *rows)) for p in pieces)


def _joined(slices) -> np.ndarray:
    parts = list(slices)
    return np.concatenate(parts, axis=1) if len(parts) != 1 else parts[0]


def slice_candidates(slices, n_variants: int, keep: int) -> tuple[np.ndarray, np.ndarray]:
    """A feature block's part of :func:`variant_candidates` from its (V + 3, w) score
    slices: the first variant's scores and the screen rows (4, p_b), and every other
    variant's top ``keep`` active features of the block (2 (V − 1), min(keep, p_b)): the
    scores (NaN: none), then the features in the block (as floats, −1: none), in feature
    order.  A feature with a NaN/Inf value or constant is never a candidate (the screen
    drops it, or refuses X)."""
    V = n_variants
    top, heads, at = RunningTopK(V - 1, keep), [], 0
    for s in slices:
        bad, lo, hi = s[V : V + 3]
        top.add(np.where((bad == 0) & (lo != hi), s[1:V], np.nan), at)
        heads.append(s[[0, V, V + 1, V + 2]])
        at += s.shape[1]
    w = min(keep, at)
    return np.concatenate(heads, axis=1), np.vstack([top.values[:, :w], top.index[:, :w]])


def slice_width(V: int, C: int) -> int:
    """Columns per slice of the statistics' arithmetic: a (V·C × w) float64 array of
    :data:`SLICE_BYTES`, at least 256 columns (for the BLAS products)."""
    return max(256, int(SLICE_BYTES // (8 * V * C)))


def _finish_block(sums: np.ndarray, plan: tuple, est: Filter, n_classes: int) -> np.ndarray:
    """A feature block's merged sums -> its (V · r + 3, w) scores and screen, in slices."""
    base, derived, counts, yy = plan
    V, C = counts.shape
    w = sums.shape[1]
    out = np.empty((V * variant_rows(est) + 3, w))
    step = slice_width(V, C)
    fused = est.statistic in TWO_CLASS_FUSED and C == 2 and variant_rows(est) == 1
    source = sources(base, derived, V) if fused else None
    for a in range(0, w, step):
        part = sums[:, a : a + step]
        if fused:  # moments and statistic in one compiled sweep, complements included
            out[:-3, a : a + step] = two_class_scores(
                part, source, counts, est.statistic, est.equal_var
            )
            out[-3:, a : a + step] = merged_screen(part)
            continue
        if derived:
            part = with_complements(part, base, derived, V, C)
        m = moments_from_sums(part, counts, C)
        out[:-3, a : a + step] = _scores_of(m, est, n_classes, yy)
        out[-3:, a : a + step] = m.screen
    return out


def sources(base: list[int], derived: dict[int, tuple[int, int]], V: int) -> np.ndarray:
    """(V, 2) rows of :func:`~fsdask.linalg.moments.two_class_scores` (and of SparseHSIC's
    resample kernels, :mod:`fsdask.stability.hsictop`): each variant's sums as a base
    variant's (second column −1) or one base variant's minus another's."""
    pos = {k: i for i, k in enumerate(base)}
    return np.array(
        [
            (pos[derived[k][0]], pos[derived[k][1]]) if k in derived else (pos[k], -1)
            for k in range(V)
        ],
        dtype=np.int64,
    )


def _scores_of(m, est: Filter, n_classes: int, yy) -> np.ndarray:
    """The (V · r, w) rows of :func:`variant_scores` from every variant's moments."""
    V = m.counts.shape[0]
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        st = stats_from_moments(m, est.statistic, n_classes, est.equal_var, yy, score_only=True)
        if variant_rows(est) == 1:  # the scores, variant by variant (statistics' rows first)
            st = scores_from_stats(est.statistic, np.moveaxis(st, -2, 0), bool(est.log_scale))
    return st.reshape(V * variant_rows(est), -1)


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
    for i, rows in enumerate(_each_variant(xb, est, variants, n_classes)):
        out[i * r : (i + 1) * r] = rows
    out[-3:] = _screen_rows(xb)
    return out


def variants_exceedance_block(
    xb: np.ndarray, est: Filter, variants: list[Variant], n_classes: int
) -> np.ndarray:
    """One feature block's part of :func:`variant_exceedances` by the route of
    :func:`variants_block`: (2 · r + 3, p_b), its :func:`exceedance_rows` and screen rows.
    Memory: a copy of the block's rows of one subsample and O(p_b), not V × p_b."""
    r = variant_rows(est)
    each = (np.reshape(rows, (1, r, -1)) for rows in _each_variant(xb, est, variants, n_classes))
    first = next(each)[0]
    counts = sum(exceeded(first, other) for other in each)
    return np.vstack([first, counts, _screen_rows(xb)])


def _each_variant(xb: np.ndarray, est: Filter, variants: list[Variant], n_classes: int):
    """Each variant's (r, p_b) rows of a feature block, one at a time."""
    r = variant_rows(est)
    for v in variants:
        sub = xb if v.rows is None else xb[v.rows]
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            st = stats_block(sub, est.statistic, v.codes, n_classes, v.yc, est.equal_var)
            rows = st if r == 2 else scores_from_stats(est.statistic, st, bool(est.log_scale))
        yield rows  # outside the errstate: a suspended generator would keep it for the caller


def _screen_rows(xb: np.ndarray) -> np.ndarray:
    return np.vstack([(~np.isfinite(xb)).sum(0), xb.min(0), xb.max(0)])


def lazy_variant_scores(
    X, est: Filter, variants: list[Variant], n_classes: int, exceedances: bool = False
):
    """The lazy (V · r + 3, p) array of :func:`variants_block` over X's feature blocks;
    with ``exceedances``, the (2 · r + 3, p) array of :func:`variants_exceedance_block`."""
    r = variant_rows(est)
    return map_features(
        variants_exceedance_block if exceedances else variants_block,
        X,
        out_rows=2 * r + 3 if exceedances else len(variants) * r + 3,
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
