"""The papers' supervised competitors, for the reproductions: SNR and SVM-RFE rankings and the
leave-one-out linear SVM on the top m genes of a ranking (scikit-learn; no fsdask estimator)."""

from __future__ import annotations

import sys
from typing import Callable, Sequence

import numpy as np

Order = Callable[[np.ndarray, np.ndarray], np.ndarray]


def snr_order(A: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Genes by |SNR| = |μ₁ − μ₂| / (σ₁ + σ₂) (Golub et al. 1999), largest first."""
    import fsdask

    return np.argsort(-fsdask.Filter("snr").fit(A, y).scores_, kind="stable")


def rfe_order(A: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Genes in the order SVM-RFE keeps them, as Guyon et al. (2002) ran it on microarrays: a
    linear SVM (C = 1) on the genes left, then the ones with the smallest w_i² removed —
    down to the nearest power of 2 at the first step, half of the rest at each later one —
    until one gene is left.  The last gene first, then each removed chunk in reverse order
    of removal, within a chunk by w_i² (scikit-learn's ``RFE`` with a fractional step
    removes a fixed count per step and ties every gene of its last step)."""
    from sklearn.svm import SVC

    left, removed = np.arange(A.shape[1]), []
    while left.size > 1:
        w2 = (SVC(kernel="linear", C=1.0).fit(A[:, left], y).coef_ ** 2).sum(axis=0)
        n = left.size
        keep = n // 2 if n & (n - 1) == 0 else 2 ** int(np.log2(n - 1))
        by_weight = np.argsort(w2, kind="stable")  # smallest w² first
        removed.append(left[by_weight[: n - keep]])
        left = left[np.sort(by_weight[n - keep :])]
    return np.concatenate([left] + [chunk[::-1] for chunk in removed[::-1]])


def standardised(A: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """A and b with the genes centred and scaled by A's mean and sd (constant genes kept)."""
    mu, sd = A.mean(0), A.std(0)
    sd = np.where(sd > 0, sd, 1.0)
    return (A - mu) / sd, (b - mu) / sd


def loo_svm_errors(
    X: np.ndarray, y: np.ndarray, order_of: Order, ms: Sequence[int], *, inside: bool = True
) -> list[int]:
    """LOO errors, for each m of ``ms``, of a linear SVM (genes standardised on the training
    fold, C = 1) on the top m genes of ``order_of(A, y_A)``: ranked inside each fold on its
    training samples (``inside``, honest), or once on all samples (optimistic)."""
    from sklearn.model_selection import LeaveOneOut
    from sklearn.svm import SVC

    once = None if inside else order_of(standardised(X, X[:1])[0], y)
    errors = np.zeros(len(ms), dtype=int)
    for tr, te in LeaveOneOut().split(X):
        A, b = standardised(X[tr], X[te])
        order = order_of(A, y[tr]) if inside else once
        for j, m in enumerate(ms):
            svm = SVC(kernel="linear", C=1.0).fit(A[:, order[:m]], y[tr])
            errors[j] += int(svm.predict(b[:, order[:m]])[0] != y[te][0])
    return errors.tolist()


def loo_svm_errors_nested(
    X: np.ndarray, y: np.ndarray, order: np.ndarray, ms: list[int]
) -> np.ndarray:
    """LOO errors of the linear SVM of :func:`loo_svm_errors` and fsdask.evaluate (C = 1,
    genes standardised on the training fold) on the top m genes of one fixed ``order``, for
    every m of ``ms`` (increasing) — the "once" protocol at every gene count.  The fold kernels
    grow by the genes added between two counts, so each count costs n SVM fits on an n × n
    kernel instead of n fits on n × m data."""
    from sklearn.svm import SVC

    n = y.size
    folds = [np.r_[0:i, i + 1 : n] for i in range(n)]
    K = np.zeros((n, n, n))  # fold × sample × sample
    errors, done = np.zeros(len(ms), dtype=int), 0
    for j, m in enumerate(ms):
        for g0 in range(done, m, 256):  # genes in blocks: n² × 256 doubles at a time
            B = np.asarray(X[:, order[g0 : min(m, g0 + 256)]], dtype=np.float64)
            for f, tr in enumerate(folds):
                mu, sd = B[tr].mean(0), B[tr].std(0)
                Z = (B - mu) / np.where(sd > 0, sd, 1.0)
                K[f] += Z @ Z.T
        done = m
        for f, tr in enumerate(folds):
            svm = SVC(kernel="precomputed", C=1.0).fit(K[f][np.ix_(tr, tr)], y[tr])
            errors[j] += int(svm.predict(K[f][f : f + 1, tr])[0] != y[f])
    return errors


def relieff_scores(A: np.ndarray, y: np.ndarray, k: int = 10) -> np.ndarray:
    """ReliefF feature weights (Kononenko 1994) exactly as scikit-rebate's ``ReliefF`` computes
    them for data without missing values (``tests/test_peers_relieff.py`` checks the equality),
    vectorised over the features: skrebate steps through instances × features in the
    interpreter, too slow for the papers' full protocols (hundreds of fits on 10⁴ genes).

    A feature with at most 10 distinct values is discrete (diff 0/1), the others continuous
    (diff |Δ| / range, or 1 where |Δ| exceeds the feature's sd when both kinds are present).
    Each sample's k nearest hits and k nearest misses of every other class, by that diff's
    Manhattan distance, update W: minus the hits' mean diff, plus the misses' diffs weighted
    by the miss classes' share of the neighbours; W is averaged over the samples."""
    A = np.asarray(A, dtype=np.float64)
    labels, y = np.unique(np.asarray(y), return_inverse=True)
    if not 2 <= labels.size <= 10:
        raise ValueError(f"ReliefF here takes 2–10 classes, got {labels.size}")
    discrete, lo, rng, sd = _feature_kinds(A)
    diff = _relieff_diff(discrete, rng, sd)
    D = _relieff_distances(A, discrete, lo, rng)
    n, scores = len(y), np.zeros(A.shape[1])
    for i in range(n):
        nn, w = _relieff_neighbours(D[i], y, i, k, labels.size)
        scores += w @ diff(A[i], A[nn])
    return scores / n


#: why ReliefF's rows in Logo's Tables 2 and 4 get no verdict against the paper's column
NOT_IRELIEF = (
    "the paper's column is I-RELIEF/BS (Sun & Li 2006, with back-selection); "
    "ReliefF is its ancestor, not the same algorithm"
)


def relieff_order(A: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Features by ReliefF weight (k = 10, Kononenko's value), largest first."""
    return np.argsort(-relieff_scores(A, y), kind="stable")


def _feature_kinds(A: np.ndarray):
    """skrebate's view of each feature: discrete (≤ 10 distinct values), and min, range, sd."""
    discrete = np.array([np.unique(col).size <= 10 for col in A.T])
    return discrete, A.min(0), np.where(discrete, 1.0, np.ptp(A, 0)), A.std(0)


def _relieff_diff(discrete, rng, sd):
    """``diff(a, B)``: the per-feature diff of sample a to each row of B, skrebate's rule."""
    mixed = discrete.any() and not discrete.all()

    def diff(a: np.ndarray, B: np.ndarray) -> np.ndarray:
        raw = np.abs(B - a)
        cont = np.where(mixed & (raw > sd), 1.0, raw / rng)
        return np.where(discrete, (raw != 0).astype(float), cont)

    return diff


def _relieff_distances(A: np.ndarray, discrete, lo, rng) -> np.ndarray:
    """skrebate's neighbour distance: Manhattan on range-scaled continuous features plus, when
    discrete features exist, their Hamming fraction (times the feature count when mixed)."""
    from scipy.spatial.distance import cdist

    d, c = discrete, ~discrete
    D = np.zeros((len(A), len(A)))
    if c.any():
        scaled = (A[:, c] - lo[c]) / rng[c]
        D += cdist(scaled, scaled, "cityblock")
    if d.any():
        D += cdist(A[:, d], A[:, d], "hamming") * (A.shape[1] if c.any() else 1)
    return D


def _relieff_neighbours(dist: np.ndarray, y: np.ndarray, i: int, k: int, n_classes: int):
    """Sample i's k nearest hits and k nearest misses per other class (skrebate's walk along
    ``argsort``, the sample itself last) and each one's weight in the update of W."""
    dist = dist.copy()
    dist[i] = float(sys.maxsize)
    order = np.argsort(dist)
    cls = y[order]
    rank = np.zeros_like(order)
    for c in range(n_classes):
        at = cls == c
        rank[at] = np.arange(1, at.sum() + 1)
    nn = order[rank <= k]
    hit = y[nn] == y[i]
    n_hit, n_miss = hit.sum(), (~hit).sum()
    w = np.zeros(nn.size)
    if n_hit:
        w[hit] = -1.0 / n_hit
    if n_miss:
        per_class = np.bincount(y[nn][~hit], minlength=n_classes)
        w[~hit] = per_class[y[nn][~hit]] / n_miss * (n_classes - 1) / n_miss
    return nn, w
