"""The α-step of Q-α: the leading eigenvector of ``W S Wᵀ`` without forming G, and A_α.

α is the leading left singular vector of the tall, skinny W (:mod:`.tall`).  We get it from
the r × r Gram ``WᵀW`` (one streaming pass, tree-summed), from TSQR of W, or matrix-free by
Lanczos on ``v ↦ Wᵀ(W v)`` (one pass per product) when r is large.  ``A_α`` is one more pass
(``sum_over_blocks``), fused with the evaluation of α = W u; where the Q-update needs only
``Wᵀα = K u`` that pass also sums the next Gram (:meth:`AlphaStep.materialize`), so an
iteration is one pass.  A small X is read into memory once and swept there
(:meth:`fsdask.linalg.Execution.local`): every sweep goes through the fit's Execution.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable

import numpy as np

from fsdask.linalg import leading_eigh, map_features, sum_over_blocks, tall_skinny_qr
from fsdask.linalg.execution import NUMPY, TREE_SUM_COPIES, Execution, backend_of
from fsdask.methods.qalpha.tall import TallSpec, prepped


@dataclasses.dataclass(kw_only=True)
class WarmStart:
    """What the next α-step reuses: the Lanczos vectors of the last one and the RNG of a cold
    start.  A loop's state derives from it, so a checkpoint carries them with the loop.

    Attributes
    ----------
    rng : numpy Generator
        Draws the start vector of a Lanczos solve that has no previous vector of its size.
    v_prev : ndarray (r,) or None
        The last Lanczos eigenvector of Wᵀ W (warm start in R^r).
    a_prev : ndarray (n,) or None
        The last α (warm start of Lanczos on W S Wᵀ in R^n).
    """

    rng: np.random.Generator
    v_prev: np.ndarray | None = None
    a_prev: np.ndarray | None = None


# --------------------------------------------------------------------------- one pass each
def affinity_block(xb: np.ndarray, a: np.ndarray, prep: Callable) -> np.ndarray:
    """``A_α = Σ_i α_i m_i m_iᵀ`` over the features of one raw block."""
    out = np.zeros((xb.shape[0], xb.shape[0]))
    for s, m in prepped(xb, prep):
        out += (m * a[s : s + m.shape[1]]) @ m.T
    return out


def affinity(X: Any, alpha: np.ndarray, prep: Callable, ex: Execution) -> np.ndarray:
    """``A_α = Σ_i α_i m_i m_iᵀ`` (q × q): one pass over X (none when X is in memory)."""
    return ex.sum_columns(
        lambda xb, ab: affinity_block(xb, ab, prep), X, alpha, shape=(X.shape[0],) * 2
    )


def uniform_affinity(X: Any, prep: Callable, ex: Execution) -> np.ndarray:
    """A_α at uniform α (α_i = 1/√n), the start of Q⁽⁰⁾: one pass over X."""
    n = X.shape[1]
    return affinity(X, np.full(n, 1.0 / np.sqrt(n)), prep, ex)


def _sym_top(H: np.ndarray) -> tuple[float, np.ndarray]:
    """Largest eigenvalue of the symmetric part of H and its eigenvector."""
    w, V = np.linalg.eigh((H + H.T) / 2)
    return float(w[-1]), V[:, -1]


def leading_from_gram(K: np.ndarray, signature: np.ndarray | None) -> tuple[float, np.ndarray]:
    """Leading algebraic eigenpair of W S Wᵀ from K = WᵀW: (λ, u) with α = W u, ‖α‖ = 1."""
    ev, V = np.linalg.eigh((K + K.T) / 2)
    keep = ev > max(ev.max(initial=0.0), 0.0) * 1e-13
    ev, V = ev[keep], V[:, keep]
    root = np.sqrt(ev)
    if signature is None:
        lam, h = float(ev[-1]), np.eye(ev.size)[:, -1]
    else:
        lam, h = _sym_top((root[:, None] * (V.T @ signature @ V)) * root[None, :])
    return lam, V @ (h / root)


class AlphaStep:
    """Leading (algebraic) eigenvector of W S Wᵀ, α = W u, with A_α evaluated in the same pass.

    X is a dask array or, when :meth:`Execution.local` held it, a NumPy array: every sweep
    goes through ``ex`` (one graph per pass for dask, a thread pool over column slices for
    NumPy), so the α-step reads the same either way.  The warm starts and the RNG live in
    the caller's loop state (a :class:`WarmStart`), passed to every call.

    Parameters
    ----------
    X : ndarray or dask array (q × n, samples × features)
    prep : callable, §2.1's preprocessing of a column block (raw → rows m_i of M)
    solver : {"auto", "gram", "tsqr", "lanczos"}, how α is found (see :meth:`choose`)
    ex : Execution, the fit's memory budget and pass count
    """

    def __init__(self, X: Any, prep: Callable, solver: str, ex: Execution):
        self.X = X
        self.prep = prep
        self.solver = solver
        self.ex = ex
        self.dtype = ex.gram_dtype(X.dtype)  # of the Gram's products: the specs are built with it

    def choose(self, spec: TallSpec) -> str:
        """ "tsqr", "gram", "lanczos" (in R^r) or "lanczos_n" (in R^n) for this W."""
        n = self.X.shape[1]
        if self.solver == "tsqr" and n >= spec.r:
            return "tsqr"
        if self.solver == "auto" and n < spec.r and backend_of(self.X) is NUMPY:
            return "tsqr"  # fewer features than qk, in memory: QR of W (n × r), no r × r eigh
        gram_fits = self.ex.fits(
            8.0 * spec.r**2, copies=TREE_SUM_COPIES
        )  # the tree-summed r × r Gram
        if self.solver == "gram" or (self.solver in ("auto", "tsqr") and gram_fits):
            return "gram"
        # matrix-free: Lanczos on Wᵀ W in R^r (S = I: one pass per product), or on W S Wᵀ in R^n
        return "lanczos" if spec.signature is None else "lanczos_n"

    def _tsqr(self, spec: TallSpec) -> tuple[float, np.ndarray, np.ndarray]:
        """(λ, α, A_α) from the QR of the tall W (n × r): Q_W R = W, λ, h = top of R S Rᵀ."""
        prep, X, ex = self.prep, self.X, self.ex
        S = np.eye(spec.r) if spec.signature is None else spec.signature

        def rows(xb):
            return spec.rows(prep(xb)).T

        if backend_of(X) is NUMPY:
            Qw, R = np.linalg.qr(ex.map_columns(rows, X, out_rows=spec.r).T)
            lam, h = _sym_top(R @ S @ R.T)
            alpha = Qw @ h
            return lam, alpha, affinity(self.X, alpha, self.prep, self.ex)
        Qw, R = tall_skinny_qr(map_features(rows, X, out_rows=spec.r, dtype=np.float64).T)
        (R,) = ex.compute(R)
        lam, h = _sym_top(R @ S @ R.T)
        alpha_d = (Qw @ h[:, None])[:, 0].rechunk((X.chunks[1],))
        A_d = sum_over_blocks(
            lambda xb, ab: affinity_block(xb, ab, prep), X, alpha_d, shape=(X.shape[0],) * 2
        )
        alpha, A = ex.compute(alpha_d, A_d)  # α joined on the client: tasks stay block-sized
        return lam, alpha, A

    def _lanczos_n(self, spec: TallSpec, warm: WarmStart) -> tuple[float, np.ndarray]:
        """(λ, α) by Lanczos on W S Wᵀ in R^n: (W S Wᵀ) a = W (S (Wᵀ a)), two sweeps per product."""
        prep, X, ex, S = self.prep, self.X, self.ex, spec.signature
        n = X.shape[1]
        a0 = warm.a_prev if warm.a_prev is not None else np.ones(n) / np.sqrt(n)

        def matvec_n(a):
            c = ex.sum_columns(
                lambda xb, ab: spec.apply_block_T(xb, prep, ab), X, a, shape=(spec.r,)
            )
            return ex.map_columns(lambda xb: spec.apply_block(xb, prep, S @ c), X)

        w, U = leading_eigh(matvec_n, n, 1, which="LA", v0=a0, tol=1e-12)
        return float(w[0]), U[:, 0]

    def _u(self, spec: TallSpec, how: str, warm: WarmStart) -> tuple[float, np.ndarray]:
        """(λ, u) with α = W u, from the Gram (one pass) or Lanczos on Wᵀ W (one per product)."""
        prep, X, ex = self.prep, self.X, self.ex
        if how == "gram":
            K = ex.sum_columns(lambda xb: spec.gram_block(xb, prep), X, shape=(spec.r, spec.r))
            return leading_from_gram(K, spec.signature)
        v0 = (
            warm.v_prev
            if warm.v_prev is not None and warm.v_prev.size == spec.r
            else warm.rng.standard_normal(spec.r)
        )

        def matvec(v):
            return ex.sum_columns(lambda xb: spec.normal_block(xb, prep, v), X, shape=(spec.r,))

        w, V = leading_eigh(matvec, spec.r, 1, which="LA", v0=v0, tol=1e-12)
        lam, v = float(w[0]), V[:, 0]
        warm.v_prev = v
        return lam, v / np.sqrt(lam)

    def __call__(self, spec: TallSpec, warm: WarmStart) -> tuple[np.ndarray, np.ndarray, float]:
        """Return (α with ‖α‖ = 1 and Σα ≥ 0, A_α, eigenvalue = αᵀ(W S Wᵀ)α).

        ``warm`` gives the warm starts and the RNG and receives the new ones.
        """
        prep = self.prep
        how = self.choose(spec)
        if how == "tsqr":
            lam, alpha, A = self._tsqr(spec)
        elif how == "lanczos_n":
            lam, alpha = self._lanczos_n(spec, warm)
            A = affinity(self.X, alpha, self.prep, self.ex)
        else:
            lam, u = self._u(spec, how, warm)

            def block(xb):  # α_b = W_b u and its A_α term from the same block
                a = spec.apply_block(xb, prep, u)
                return a, [affinity_block(xb, a, prep)]

            alpha, (A,) = self.ex.map_and_sum_columns(
                block, self.X, shapes=[(self.X.shape[0],) * 2]
            )
        alpha, A = _unit_positive(alpha, A)
        warm.a_prev = alpha
        return alpha, A, lam

    # ---- one pass per α-step: the Gram of the next step is summed while α is written out
    def fusable(self, spec: TallSpec) -> bool:
        """Whether α comes from the Gram (then α-step and next Gram can share a pass)."""
        return self.choose(spec) == "gram"

    def gram(self, spec: TallSpec) -> tuple[np.ndarray, np.ndarray]:
        """(K = WᵀW, F = Φ W) in one pass (see :meth:`TallSpec.moments`)."""
        r, f = spec.r, spec.n_functionals(self.X.shape[0])

        def block(xb):  # K and F side by side in one summed vector: one tree-sum
            out = np.zeros(r * r + f * r)
            for _, m in prepped(xb, self.prep, spec.batch):
                Km, Fm = spec.moments(m)
                out[: r * r] += Km.ravel()
                out[r * r :] += Fm.ravel()
            return out

        flat = self.ex.sum_columns(block, self.X, shape=(r * r + f * r,))
        return flat[: r * r].reshape(r, r), flat[r * r :].reshape(f, r)

    def materialize(
        self, spec: TallSpec, u: np.ndarray, next_spec: TallSpec | None, warm: WarmStart
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """α = W u and A_α — and, from the same blocks, (K, F) of ``next_spec`` (one pass).

        Returns (α, A_α, K, F); ``warm.a_prev`` receives α.  Memory: about
        ``TREE_SUM_COPIES`` copies of A_α (q × q), K (r × r) and F on the tree-sum.
        """
        prep, q = self.prep, self.X.shape[0]
        r = 0 if next_spec is None else next_spec.r
        f = 0 if next_spec is None else next_spec.n_functionals(q)
        batch = spec.batch if next_spec is None else min(spec.batch, next_spec.batch)

        def block(xb):  # each batch of features preprocessed once, used for all four terms
            alpha_b, A_b, K_b, F_b = [], np.zeros((q, q)), np.zeros((r, r)), np.zeros((f, r))
            for _, m in prepped(xb, prep, batch):
                a = spec.matvec(m, u)
                alpha_b.append(a)
                A_b += (m * a) @ m.T
                if next_spec is not None:
                    Km, Fm = next_spec.moments(m)
                    K_b += Km
                    F_b += Fm
            return (np.concatenate(alpha_b) if alpha_b else np.zeros(0)), [A_b, K_b, F_b]

        alpha, (A, K, F) = self.ex.map_and_sum_columns(
            block, self.X, shapes=[(q, q), (r, r), (f, r)]
        )
        alpha, A = _unit_positive(alpha, A)
        warm.a_prev = alpha
        return alpha, A, K, F


def gram_alpha(K: np.ndarray, F: np.ndarray, signature: np.ndarray | None = None) -> np.ndarray:
    """u with α = W u the unit leading eigenvector of W S Wᵀ and Σα = F₀u ≥ 0 (Def. 2 steps 1–2).

    ``F₀ = (Wᵀ1)ᵀ`` is the first row of the functionals summed with K.
    """
    _, u = leading_from_gram(K, signature)
    return -u if F[0] @ u < 0 else u


def _unit_positive(alpha: np.ndarray, A: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """‖α‖ = 1 (only rank truncation can make ‖W u‖ ≠ 1) and Σα ≥ 0; A_α scaled alike."""
    nrm = np.linalg.norm(alpha)
    if nrm > 0 and abs(nrm - 1) > 1e-6:
        alpha, A = alpha / nrm, A / nrm
    if alpha.sum() < 0:
        alpha, A = -alpha, -A
    return alpha, A
