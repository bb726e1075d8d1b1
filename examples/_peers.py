"""The papers' supervised competitors, for the reproductions: SNR and SVM-RFE rankings and the
leave-one-out linear SVM on the top m genes of a ranking (scikit-learn; no fsdask estimator)."""

from __future__ import annotations

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
