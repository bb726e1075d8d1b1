"""Every resample's SparseHSIC selection of k features from each block's candidates.

The pass of :mod:`fsdask.stability.hsicpass` can give every resample's A_r for all p
features, but a selection of k features reads few of its rows.  Step 3 bisects ρ for k
features (:func:`fsdask.methods.hsic.rho.bisect`); a row with ‖A_i‖² ≤ ρ never enters a
trial (:class:`~fsdask.methods.hsic.rho.Trials`); the bisection starts at
ρ_hi = min(k-th largest ‖A_i‖², largest ‖A_i‖² / c) and steps down by
:data:`~fsdask.methods.hsic.rho.STEP_DOWN` until k are selected — in practice once — and
then only narrows.  A feature block's own start, from its columns alone, is at most the
global one.  So each block, where its merged sums are, keeps for every resample only the
rows above t_b = (its start) / STEP_DOWN; the rows kept then hold every row above
T = max_b t_b ≤ ρ_hi / STEP_DOWN, and a bisection whose trials all stay at ρ ≥ T runs on
the same rows, with the same values, as on all of A_r: its selection is the full route's,
bit for bit.  A resample whose bisection goes lower (``Trials.lowest`` < T: fewer than k
selected at ρ_hi / STEP_DOWN) is recomputed by the full route in a second pass, for it
alone.

Within a block the sums come a cache-sized slice at a time
(:meth:`~fsdask.linalg.execution.Execution.sum_blocks_each`): one compiled sweep gives
every resample's ‖A_i‖² to 10⁻⁹ with one division per value (:func:`approx_norm2`, class
labels), the columns above the block's start so far (less :data:`SLACK`) get their rows
of A and ‖A_i‖² exactly — the roundings of the full route (:func:`resample_rows`) — and
the block keeps those above its final t_b.  Nothing of size p per resample reaches the
client.

Memory: per task that of the pass (a slice of the sums, (V × w) values of it) and the
block's candidates; on the client every resample's candidates (typically a few per cent
of p each, when most features are noise) and the screen (3 × p).
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any

import numba
import numpy as np

from fsdask.base import top_k_mask
from fsdask.errors import ParameterError
from fsdask.fitting import progress_line
from fsdask.linalg.colstats import MOMENT_MAXIMA, merged_screen
from fsdask.linalg.tall import row_norm2
from fsdask.methods.hsic import SparseHSIC
from fsdask.methods.hsic.components import ranked
from fsdask.methods.hsic.estimator import warn_unconverged
from fsdask.methods.hsic.matrix import scaled_A
from fsdask.methods.hsic.rho import STEP_DOWN, Trials, bisect
from fsdask.stability import hsicpass
from fsdask.stability.hsicpass import (
    CONSTANT_ULPS,
    Layout,
    each_resample,
    pass_terms,
    resample_stats,
    resolved_k,
)
from fsdask.stability.refit import refit_all
from fsdask.stability.resample import RunningTopK

#: the route is taken when k is at most this share of the features (its candidates then
#: stay a small part of A)
MAX_SHARE = 1 / 4
#: a column is left out when its approximate ‖A_i‖² (within 10⁻⁹ of the exact value) is
#: below the block's floor by this share; the floor given for the block is lowered by half
#: of it (so it bounds the exact values left out yet stays below the exact start / STEP_DOWN)
SLACK = 1e-6
#: bytes of the sums of one slice of a block's columns (all resamples): made, ranked and
#: cut while they stay in the CPU's cache
PIECE_BYTES = 2 * 2**20
#: ... and X has at least this many features: below, every resample's sums are small and
#: the full route never needs a second pass
MIN_FEATURES = 2**14


def candidate_k(est: SparseHSIC, p: int) -> int | None:
    """The k the blocks rank by when a selection of k features can come from candidates:
    ``n_features_to_select`` resolved with the p features (a fraction gives at least the
    k of the active ones), when it is at most :data:`MAX_SHARE` of p, p is at least
    :data:`MIN_FEATURES` and constant features are dropped (``on_constant="error"`` is the
    full route's to raise); else None."""
    k = est.n_features_to_select
    if k is None or est.on_constant != "drop" or p < MIN_FEATURES:
        return None
    k = resolved_k(k, p)
    return k if 1 <= k <= MAX_SHARE * p else None


def candidate_share(ctx: Any, layout: Layout, p: int) -> float:
    """Candidate rows per resample and per feature that half the fit's memory budget holds
    on the client (a row: its A, its ‖A_i‖² and its column, float64)."""
    row = 8.0 * (max(layout.widths) + 2)
    return ctx.budget / (2.0 * len(layout.sizes) * row * max(p, 1))


def fits(ctx: Any, layout: Layout, p: int, k: int) -> bool:
    """Whether the budget holds at least 16 k candidate rows per resample."""
    return candidate_share(ctx, layout, p) * p >= 16 * k


@dataclasses.dataclass(frozen=True)
class BlockCandidates:
    """One feature block's part of :func:`candidate_selections`.

    Attributes
    ----------
    start : int, the block's first column
    screen : ndarray (3, p_b), NaN/Inf count, minimum, maximum of each column
    offsets : int ndarray (V + 1,), resample v's candidates are ``offsets[v]:offsets[v + 1]``
    cols : int ndarray, the candidates' columns (in the block; ascending per resample)
    A : ndarray (|cols| × max c_v), their rows of the resample's scaled A (first c_v columns)
    norm2 : ndarray, their ‖A_i‖²
    floor : ndarray (V,), t_b: every column left out has ‖A_i‖² ≤ t_b (−inf: none left out)
    varies : bool ndarray (V,), whether some column varies within the resample
    """

    start: int
    screen: np.ndarray
    offsets: np.ndarray
    cols: np.ndarray
    A: np.ndarray
    norm2: np.ndarray
    floor: np.ndarray
    varies: np.ndarray

    def of(self, v: int, above: float, width: int) -> tuple[np.ndarray, np.ndarray]:
        """Resample v's candidates with ‖A_i‖² > ``above``: (columns of X, A rows (· × width))."""
        part = slice(self.offsets[v], self.offsets[v + 1])
        keep = self.norm2[part] > above
        return self.start + self.cols[part][keep], self.A[part][keep, :width]


def one_pass_selections(
    ctx: Any,
    est: SparseHSIC,
    X: Any,
    y: Any,
    rows: list,
    factors: list[tuple],
    layout: Layout,
    screen,
) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """Every resample's SparseHSIC selection from one pass over X: from each block's
    candidates (:func:`candidate_selections`) when k is given and they fit the budget,
    else from every A_r (:func:`~.hsicpass.resample_selections`) when those fit, else None
    (the caller refits).

    Parameters
    ----------
    ctx : FitContext
    est : SparseHSIC, unfitted parameters only are used
    X : dask array (n, p)
    y : ndarray (n,) or (n, t)
    rows : list of index arrays (None: all samples), the resamples
    factors : list of (Δ_r, kind, info), :func:`~.hsicpass.resample_factors`
    layout : Layout, :func:`~.hsicpass.layout_of`
    screen : callable ``(bad, lo, hi) -> active``, the fit's screen of X

    Returns
    -------
    (bool ndarray (V, p_active), float ndarray (p_active,), bool ndarray (p,)): each
    resample's selection, the first resample's scores (the plain fit) and X's active
    features; or None.
    """
    k = candidate_k(est, X.shape[1])
    if k is not None and fits(ctx, layout, X.shape[1], k):
        support, plain, active, redo = candidate_selections(ctx, est, X, layout, screen, k)
        if redo:
            _redo(ctx, est, X, y, (rows, factors, redo), (support, plain, active), screen)
        return support, plain, active
    if not hsicpass.fits(ctx, layout, X.shape[1]):
        return None
    support, scores, active = hsicpass.resample_selections(ctx, est, X, factors, layout, screen)
    return support, scores[0], active


def _redo(ctx: Any, est: SparseHSIC, X: Any, y: Any, which: tuple, into: tuple, screen) -> None:
    """The resamples ``redo`` (``which`` = (rows, factors, redo)) whose bisection needed
    rows below their candidates, from every A_r of theirs (a second pass over X), or
    refitted when those do not fit; written into ``into`` = (support, plain, active)."""
    rows, factors, redo = which
    support, plain, active = into
    progress_line(
        f"stability: {len(redo)} of {len(rows)} resamples needed rows of A below their "
        "blocks' candidates; computing them from a second pass over X"
    )
    sub = hsicpass.layout_of([factors[v] for v in redo], y, [rows[v] for v in redo], X.shape[0])
    if hsicpass.fits(ctx, sub, X.shape[1]):
        again, scores, _ = hsicpass.resample_selections(
            ctx, est, X, [factors[v] for v in redo], sub, screen
        )
    else:
        y = np.asarray(y)
        resamples = [(rows[v], y if rows[v] is None else y[rows[v]]) for v in redo]
        Xa = X if active.all() else X[:, active]
        again, scores = refit_all(ctx, est, Xa, y, resamples, np.zeros(len(redo), np.int64))
    support[redo] = again
    if redo[0] == 0:
        plain[:] = scores[0]


def candidate_selections(
    ctx: Any, est: SparseHSIC, X: Any, layout: Layout, screen, k_pass: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray, list[int]]:
    """Every resample's selection of k features from one pass over X, from each block's
    candidates (module docstring).

    Parameters
    ----------
    ctx : FitContext, the fit's (its execution counts the pass, warnings go through it)
    est : SparseHSIC, unfitted parameters only are used
    X : dask array (n, p), any layout
    layout : Layout, the products of the pass (:func:`~.hsicpass.layout_of`)
    screen : callable ``(bad, lo, hi) -> active``, the fit's screen of X (raises on NaN/Inf)
    k_pass : int, :func:`candidate_k`

    Returns
    -------
    support : bool ndarray (V, p_active), each resample's selection (rows of ``redo``: empty)
    plain : float ndarray (p_active,), the first resample's scores (|u|; the plain fit)
    active : bool ndarray (p,), X's active features
    redo : list of int, the resamples whose bisection went below their candidates, for
        the full route
    """
    blocks = candidate_pass(ctx, est, X, layout, k_pass)
    active = screen(*np.hstack([b.screen for b in blocks]))
    position = np.cumsum(active) - 1  # a feature's place among the active ones
    m, V = int(active.sum()), len(layout.sizes)
    k = resolved_k(est.n_features_to_select, m)
    support, plain = np.zeros((V, m), bool), np.zeros(m)

    widths = layout.widths

    def one(v: int) -> tuple | None:
        if not 1 <= k <= m or not any(b.varies[v] for b in blocks):
            return None  # the full route raises what a refit raises
        floor = max(float(b.floor[v]) for b in blocks)  # no trial goes below it: rows at or
        parts = [b.of(v, floor, widths[v]) for b in blocks]  # below it never matter
        cols = np.concatenate([c for c, _ in parts])
        A = np.ascontiguousarray(np.concatenate([a for _, a in parts]))
        return top_of(est, A, k, floor), position[cols]

    redo = []
    for v, out in enumerate(each_resample(ctx, one, V)):
        if out is None or out[0] is None:
            redo.append(v)
            continue
        (chosen, scores), at = out
        support[v, at[chosen]] = True
        if v == 0:
            plain[at] = scores
    return support, plain, active, redo


def candidate_pass(
    ctx: Any, est: SparseHSIC, X: Any, layout: Layout, k_pass: int
) -> list[BlockCandidates]:
    """The pass of :func:`candidate_selections`: every feature block's
    :class:`BlockCandidates` (:func:`block_candidates`, where the block's sums are), in
    feature order; one pass over X."""
    fn, rows, columns = pass_terms(ctx.execution, X, layout)
    finish = functools.partial(
        block_candidates,
        layout=layout,
        k=k_pass,
        standardize=bool(est.standardize),
        share=candidate_share(ctx, layout, X.shape[1]),
    )
    return ctx.execution.sum_blocks_each(
        fn,
        X,
        rows,
        shape=(layout.rows,),
        maxima=MOMENT_MAXIMA,
        columns=columns,
        finish=finish,
        step=max(256, PIECE_BYTES // (8 * layout.rows)),
    )


def top_of(est: SparseHSIC, A: np.ndarray, k: int, floor: float) -> tuple | None:
    """A resample's step 3 on its candidate rows: the k selected (a mask over the rows) and
    the scores |u|, as :func:`~.hsicpass.selection_of` gives them on all rows — or None
    when the bisection needed rows at or below ``floor`` (or fewer than k are held).

    Parameters
    ----------
    est : SparseHSIC
    A : ndarray (m_c × c), the candidate rows of the resample's scaled A, in feature order
    k : int
    floor : float, every row left out has ‖A_i‖² ≤ floor

    Returns
    -------
    (bool ndarray (m_c,), float ndarray (m_c,)) or None.
    """
    norm2 = row_norm2(A)
    if norm2.size < k:
        return None
    trials = Trials(
        A, norm2, est.n_components, est.gamma, {"tol": est.tol, "max_iter": est.max_iter}
    )
    try:
        _, results, _ = bisect(trials, k)
    except ParameterError:
        return None  # below every candidate: the full route says it
    if trials.lowest < floor:
        return None
    warn_unconverged(results, est.max_iter, None)
    rank = ranked(results, norm2)  # as SparseHSIC ranks its features
    return top_k_mask(rank.key, k), rank.scores


def block_candidates(
    pieces: Any, start: int, width: int, *, layout: Layout, k: int, standardize: bool, share: float
) -> BlockCandidates:
    """A feature block's :class:`BlockCandidates` from its merged sums, which arrive a
    slice of columns at a time (the ``finish`` of
    :meth:`~fsdask.linalg.execution.Execution.sum_blocks_each`).

    For each resample: every column's ‖A_i‖² to a few ulps (:func:`approx_norm2`), the
    block's start of the bisection — min(k-th largest, largest / c), at most the global
    one — and the columns above t_b = start / STEP_DOWN (less :data:`SLACK`, and those
    the approximation cannot place), whose A and ‖A_i‖² are then made exactly
    (:func:`resample_rows`) while the slice is at hand; kept: the rows whose exact
    ‖A_i‖² exceeds t_b.  The start over the slices so far is at most the block's, so each
    slice keeps a superset, cut at the end.  A block with fewer than k columns keeps them
    all.  A block keeps at most max(2k, ``share`` × its width) rows per resample
    (:func:`fits`; the floor raised to the next largest).
    """
    V, widths = len(layout.sizes), np.asarray(layout.widths, dtype=np.float64)
    top = RunningTopK(V, k)
    screens, parts = [], []
    varies, at = np.zeros(V, bool), 0
    floor, held = np.full(V, -np.inf), np.zeros(V, np.int64)
    lowest = np.full(V, -np.inf)  # the floor the budget's cap sets (exact values)
    cap = max(2 * k, int(share * width))
    for sums in pieces:
        screen = merged_screen(sums)
        valid = (screen[0] == 0) & (screen[1] != screen[2])  # the screen drops or refuses others
        approx, unsure, moving = approx_norm2(sums, layout, valid, standardize)
        top.add(approx, at)
        floor = np.maximum(_floor(top, widths), lowest)
        offsets, cols = _pick(approx, unsure, floor * (1 - SLACK))
        rows, norms = resample_rows(sums, layout, cols, offsets, standardize)
        parts.append((offsets, cols + at, norms, rows))
        screens.append(screen)
        varies |= moving
        at += sums.shape[1]
        held += np.diff(offsets)
        if (held > 2 * cap).any():  # a task holds at most about twice its share
            parts, lowest = _compact(parts, np.maximum(floor * (1 - SLACK / 2), lowest), cap)
            held = np.diff(parts[0][0])
    floor = np.maximum(floor * (1 - SLACK / 2), lowest)  # above every exact value left out,
    [(offsets, cols, norms, A)], floor = _compact(parts, floor, cap)  # below the start's
    which = np.repeat(np.arange(V), np.diff(offsets))
    varies |= np.bincount(which[norms > 0], minlength=V) > 0  # unsure ones that do vary
    return BlockCandidates(start, np.hstack(screens), offsets, cols, A, norms, floor, varies)


def _compact(parts: list, floor: np.ndarray, cap: int) -> tuple[list, np.ndarray]:
    """The records of ``parts`` (each: offsets (V + 1,), columns, ‖A_i‖², rows) above
    their resample's floor, at most ``cap`` per resample (the floor raised to the
    (cap + 1)-th largest, :func:`_capped`), as one part grouped by resample in column
    order; and the floors."""
    V = parts[0][0].size - 1
    bounds = np.cumsum([0] + [p[0][-1] for p in parts])
    table = np.array([p[0] + b for p, b in zip(parts, bounds)]).reshape(-1, V + 1)
    cols, norms, A = (np.concatenate([p[i] for p in parts]) for i in (1, 2, 3))
    offsets, order = _regroup(table, norms, floor)
    if (np.diff(offsets) > cap).any():  # the budget's share: only the cap largest are kept
        floor = _capped(norms, offsets, order, floor, cap)
        offsets, order = _regroup(table, norms, floor)
    return [(offsets, cols[order], norms[order], A[order])], floor


def _capped(
    norms: np.ndarray, offsets: np.ndarray, order: np.ndarray, floor: np.ndarray, cap: int
) -> np.ndarray:
    """The floors raised, for each resample with more than ``cap`` candidates, to its
    (cap + 1)-th largest ‖A_i‖²: the rows at or below it are left out (a bisection that
    needs them is caught by ``Trials.lowest`` and sent to the full route)."""
    floor = floor.copy()
    for v in np.flatnonzero(np.diff(offsets) > cap):
        vals = norms[order[offsets[v] : offsets[v + 1]]]
        floor[v] = np.partition(vals, vals.size - cap - 1)[vals.size - cap - 1]
    return floor


@numba.njit(nogil=True, cache=True)
def _regroup(table, norms, floor):  # pragma: no cover - numba
    """The records of every slice (slice s holds resample v's at ``table[s, v]:table[s, v + 1]``)
    above their resample's floor, grouped by resample in column order: (offsets (V + 1,),
    the records' order)."""
    S, V = table.shape[0], table.shape[1] - 1
    offsets = np.zeros(V + 1, np.int64)
    order = np.empty(norms.size, np.int64)
    r = 0
    for v in range(V):
        for s in range(S):
            for i in range(table[s, v], table[s, v + 1]):
                if norms[i] > floor[v]:
                    order[r] = i
                    r += 1
        offsets[v + 1] = r
    return offsets, order[:r]


def _floor(top: RunningTopK, widths: np.ndarray) -> np.ndarray:
    """t_b of the columns offered so far: min(k-th largest, largest / c) / STEP_DOWN, or
    −inf while fewer than k have a value."""
    kept = top.values
    full = ~np.isnan(kept).any(axis=1)
    start = np.minimum(kept.min(axis=1), kept.max(axis=1) / widths)
    return np.where(full, start / STEP_DOWN, -np.inf)


def approx_norm2(
    sums: np.ndarray, layout: Layout, valid: np.ndarray, standardize: bool
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Every resample's ‖A_i‖² over a block's columns, to choose which to make exactly.

    Returns
    -------
    norm2 : ndarray (V, p_b), float64: within a relative 10⁻⁹ of the exact value
        (:func:`resample_rows`), NaN for a column the screen drops or an unsure one
    unsure : bool ndarray (V, p_b): columns whose value the approximation cannot vouch for
        (near constant within the resample, or cancelling sums): the exact one decides
    varies : bool ndarray (V,), whether some column surely varies within the resample

    Class labels: one compiled sweep with one division per value (:func:`_class_approx`);
    any other response: the exact values (:func:`resample_rows`).
    """
    V, w = len(layout.sizes), sums.shape[1]
    out, unsure = np.full((V, w), np.nan), np.zeros((V, w), bool)
    if layout.classes is not None:
        source, counts, sizes = layout.class_terms
        moving = np.zeros(V, np.int64)
        _class_approx(
            sums, source, counts, sizes, valid, standardize, CONSTANT_ULPS, out, unsure, moving
        )
        return out, unsure, moving > 0
    idx = np.flatnonzero(valid)
    rows, norms = resample_rows(
        sums, layout, np.tile(idx, V), np.arange(V + 1) * idx.size, standardize
    )
    out[:, idx] = norms.reshape(V, idx.size)
    return out, unsure, (out > 0).any(axis=1)


def resample_rows(
    sums: np.ndarray, layout: Layout, cols: np.ndarray, offsets: np.ndarray, standardize: bool
) -> tuple[np.ndarray, np.ndarray]:
    """The rows of each resample's scaled A, and their ‖A_i‖², for some of a block's
    columns, with the roundings of the full route (:func:`~.hsicpass.resample_stats`,
    :func:`~fsdask.methods.hsic.matrix.scaled_A`, :func:`~fsdask.linalg.tall.row_norm2`:
    0 for a column constant within the resample).

    Parameters
    ----------
    sums : ndarray (rows, w), the block's merged sums
    layout : Layout
    cols : int ndarray, resample v's columns are ``cols[offsets[v]:offsets[v + 1]]``
    offsets : int ndarray (V + 1,)
    standardize : bool

    Returns
    -------
    (ndarray (|cols|, max_v c_v), ndarray (|cols|,)), float64: resample v's rows in their
    first c_v columns, and their ‖A_i‖².
    """
    V = len(layout.sizes)
    out = np.zeros((cols.size, max(layout.widths, default=0)))
    norms = np.zeros(cols.size)
    if layout.classes is None:
        for v in range(V):
            part = slice(offsets[v], offsets[v + 1])
            stats = resample_stats(sums, v, layout, cols[part])
            moves = stats[-2] != 0
            A = scaled_A(stats, moves, stats[-1] if standardize else None, None)
            out[part, : A.shape[1]], norms[part] = A, row_norm2(A)
        return out, norms
    source, counts, sizes = layout.class_terms
    _class_rows(sums, source, counts, sizes, cols, offsets, standardize, CONSTANT_ULPS, out, norms)
    return out, norms


@numba.njit(nogil=True, cache=True)
def _pick(approx, unsure, above):  # pragma: no cover - numba
    """Each resample's columns with an approximate ‖A_i‖² above ``above[v]``, or unsure:
    (offsets (V + 1,), columns), resample by resample, columns ascending."""
    V, w = approx.shape
    offsets = np.zeros(V + 1, np.int64)
    for v in range(V):
        n = 0
        for j in range(w):
            n += unsure[v, j] or approx[v, j] > above[v]
        offsets[v + 1] = offsets[v] + n
    cols = np.empty(offsets[V], np.int64)
    for v in range(V):
        r = offsets[v]
        for j in range(w):
            if unsure[v, j] or approx[v, j] > above[v]:
                cols[r] = j
                r += 1
    return offsets, cols


#: columns of a block's sums swept for every resample while they are in the CPU's cache
_TILE = 256
#: a deviation cancelling to less than 1/_COND of its operands (or of the sum of squares)
#: makes a column unsure: below it the approximation's error stays under 10⁻⁹ relative
_COND = 1e6


@numba.njit(nogil=True, cache=True, error_model="numpy")
def _class_sums(sums, f, g, C, idx, j0, L, T, s1, s2):  # pragma: no cover - numba
    """T_c (sums of base f, minus those of g ≥ 0), s1 = Σ_c T_c and s2 = Σ_c Q_c of columns
    ``idx`` (empty: the L columns from j0, read in SIMD) of one resample, in class order."""
    Vb = (sums.shape[0] - 4) // (2 * C)
    gather, sub = idx.size > 0, g >= 0  # loop-invariant: the compiler unswitches them
    for c in range(C):
        rt, rq, gt, gq = f * C + c, Vb * C + f * C + c, g * C + c, Vb * C + g * C + c
        for i in range(L):
            j = idx[i] if gather else j0 + i
            t, q = sums[rt, j], sums[rq, j]
            if sub:
                t, q = t - sums[gt, j], q - sums[gq, j]
            T[c, i] = t
            s1[i] = s1[i] + t if c else t
            s2[i] = s2[i] + q if c else q


@numba.njit(nogil=True, cache=True, error_model="numpy")
def _class_tile(
    sums, f, g, counts_v, n, standardize, coef, idx, j0, L, T, s1, s2, fac
):  # pragma: no cover - numba
    """Columns ``idx`` (empty: the L columns from j0) of one resample's scaled A into
    ``T[:m, :L]`` (m, returned: the classes present), 0 where a column is constant within
    the resample.

    The roundings of :func:`~.hsicpass.resample_parts`, ``resample_stats`` and
    ``scaled_A``, in their order: T_c = sums of base f (minus those of g), s1 = Σ_c T_c,
    dev = max(s2 − s1·s1/n, 0), constant when dev ≤ ``coef``·s2, A_c = (T_c/n_c − s1/n) /
    (n − 1) × 1/sd.  Branch-free loops over the columns, so the divisions run in SIMD.
    """
    _class_sums(sums, f, g, counts_v.size, idx, j0, L, T, s1, s2)
    nm1 = n - 1.0
    for i in range(L):
        d = s2[i] - s1[i] * s1[i] / n
        d = d if d > 0.0 else 0.0
        sd_inv = 1.0 / np.sqrt(d / nm1) if standardize else 1.0
        fac[i] = 0.0 if d <= coef * s2[i] else sd_inv
        s1[i] = s1[i] / n
    m = 0
    for c in range(counts_v.size):
        if counts_v[c] > 0:
            cnt = counts_v[c]
            for i in range(L):
                T[m, i] = (T[c, i] / cnt - s1[i]) / nm1 * fac[i]
            m += 1
    return m


@numba.njit(nogil=True, cache=True, error_model="numpy")
def _class_approx(
    sums, source, counts, sizes, valid, standardize, ulps, out, unsure, moving
):  # pragma: no cover - numba
    """:func:`approx_norm2` for class labels, a tile of columns at a time for every
    resample (each column's sums read from memory once): A's formula with reciprocals
    (one division and one square root per column), and the conditions under which its
    relative error stays below 10⁻⁹ — else the column is unsure."""
    V, C = counts.shape
    w = sums.shape[1]
    T, s1, s2 = np.empty((C, _TILE)), np.empty(_TILE), np.empty(_TILE)
    scale, mean, acc, ill = np.empty(_TILE), np.empty(_TILE), np.empty(_TILE), np.empty(_TILE)
    eps = np.finfo(np.float64).eps
    none = np.empty(0, np.int64)
    for j0 in range(0, w, _TILE):
        L = min(_TILE, w - j0)
        for v in range(V):
            n = sizes[v]
            inv_n, inv_nm1, near = 1.0 / n, 1.0 / (n - 1.0), 2.0 * ulps * n * eps
            _class_sums(sums, source[v, 0], source[v, 1], C, none, j0, L, T, s1, s2)
            for i in range(L):
                sq = s1[i] * s1[i] * inv_n
                d = s2[i] - sq
                # near constant (the exact test decides) or the deviation cancels: unsure
                ill[i] = (d <= near * s2[i]) + (d * _COND < sq)
                d = d if d > 0.0 else 1.0
                scale[i] = inv_nm1 / np.sqrt(d * inv_nm1) if standardize else inv_nm1
                mean[i] = s1[i] * inv_n
                acc[i] = 0.0
            for c in range(C):
                if counts[v, c] > 0:
                    inv_c = 1.0 / counts[v, c]
                    for i in range(L):
                        x = T[c, i] * inv_c
                        a = x - mean[i]
                        ill[i] += abs(a) * _COND < abs(x) + abs(mean[i])
                        a = a * scale[i]
                        acc[i] += a * a
            moves = 0
            for i in range(L):  # branch-free: the loop runs in SIMD
                ok, zero = valid[j0 + i], s2[i] == 0.0  # zero: every value is the shift K
                doubt = ok & (ill[i] != 0.0) & ~zero
                value = 0.0 if zero else acc[i]  # exactly constant: A = 0
                out[v, j0 + i] = np.nan if doubt | ~ok else value
                unsure[v, j0 + i] = doubt
                moves += ok & (ill[i] == 0.0) & ~zero
            moving[v] += moves


@numba.njit(nogil=True, cache=True, error_model="numpy")
def _class_rows(
    sums, source, counts, sizes, cols, at, standardize, ulps, rows, norms
):  # pragma: no cover - numba
    """:func:`resample_rows` for class labels: resample v's rows ``at[v]:at[v + 1]`` hold
    its columns ``cols[at[v]:at[v + 1]]``."""
    V, C = counts.shape
    T, s1, s2, fac = np.empty((C, _TILE)), np.empty(_TILE), np.empty(_TILE), np.empty(_TILE)
    eps = np.finfo(np.float64).eps
    for v in range(V):
        n = sizes[v]
        for r0 in range(at[v], at[v + 1], _TILE):
            idx = cols[r0 : min(r0 + _TILE, at[v + 1])]
            m = _class_tile(
                sums,
                source[v, 0],
                source[v, 1],
                counts[v],
                n,
                standardize,
                ulps * n * eps,
                idx,
                0,
                idx.size,
                T,
                s1,
                s2,
                fac,
            )
            for i in range(idx.size):
                acc = T[0, i] * T[0, i]  # tall.row_norm2's order
                rows[r0 + i, 0] = T[0, i]
                for c in range(1, m):
                    rows[r0 + i, c] = T[c, i]
                    acc = acc + T[c, i] * T[c, i]
                norms[r0 + i] = acc


__all__ = [
    "MAX_SHARE",
    "MIN_FEATURES",
    "BlockCandidates",
    "candidate_k",
    "candidate_share",
    "fits",
    "one_pass_selections",
    "candidate_selections",
    "candidate_pass",
    "top_of",
    "block_candidates",
    "SLACK",
    "approx_norm2",
    "resample_rows",
]
