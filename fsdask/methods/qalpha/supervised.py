"""Def. 6 of Wolf & Shashua (§3.1): the supervised Q-α over class blocks of samples.

𝒢 = Σ_l G^{ll} − γ Σ_{g≠h} G^{gh} (criterion (5)); each class block M^l of samples is
centred and normalised within its class (:func:`~fsdask.methods.qalpha.tall.class_normalize_block`)
and every ordered pair of classes (g, h) has its own Q^{gh}.  :func:`supervised_step` is one
iteration; :func:`supervised_qalpha` runs one start.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from fsdask._validation import class_codes
from fsdask.errors import InputError
from fsdask.fitting import FitContext
from fsdask.linalg.execution import Execution
from fsdask.methods.qalpha.alpha import AlphaStep, WarmStart, uniform_affinity
from fsdask.methods.qalpha.loop import (
    Iterate,
    QAlphaRun,
    criterion,
    iterate_alpha,
    orth,
    right_singular,
    run_of,
)
from fsdask.methods.qalpha.tall import class_normalize_block, supervised_spec


@dataclasses.dataclass
class ClassBlocks:
    """The class blocks of the samples and the pairs (g, h) of Def. 6.

    Attributes
    ----------
    classes : ndarray, the class labels (sorted)
    groups : list of int arrays, the samples of each class
    slices : list of slice, each class's rows in the class-sorted M
    kk : dict {(g, h): k^{gh}}, k_within for g = h, k_between otherwise (ordered pairs)
    """

    classes: np.ndarray
    groups: list
    slices: list
    kk: dict

    @property
    def pairs(self) -> list[tuple[int, int]]:
        return list(self.kk)

    def prep(self, xb: np.ndarray) -> np.ndarray:
        """§2.1's preprocessing within each class (Def. 6), the blocks stacked."""
        return class_normalize_block(xb, self.groups)

    def pack(self, Qs: dict) -> tuple[np.ndarray, str]:
        """The Q^{gh} as one vector (the loop state's ``Q``), in the order of ``pairs``, and
        each one's memory order ("C" or "F": the BLAS products then round as they did)."""
        orders = "".join("F" if _fortran(Qs[p]) else "C" for p in self.pairs)
        flat = np.concatenate([Qs[p].ravel(order=o) for p, o in zip(self.pairs, orders)])
        return flat, orders

    def unpack(self, flat: np.ndarray, orders: str) -> dict:
        """The Q^{gh} (sizes[h] × k^{gh}) from :meth:`pack`'s vector and memory orders."""
        Qs, at = {}, 0
        for (g, h), order in zip(self.pairs, orders):
            shape = (self.slices[h].stop - self.slices[h].start, self.kk[g, h])
            Qs[g, h] = flat[at : at + shape[0] * shape[1]].reshape(shape, order=order)
            at += shape[0] * shape[1]
        return Qs

    def labelled(self, Qs: dict) -> dict:
        """The Q^{gh} keyed by the class labels (g, h)."""
        c = [v.item() if hasattr(v, "item") else v for v in self.classes]
        return {(c[g], c[h]): Q for (g, h), Q in Qs.items()}


def _fortran(a: np.ndarray) -> bool:
    return bool(a.flags.f_contiguous and not a.flags.c_contiguous)


def class_blocks(y: np.ndarray, k_within: int, k_between: int) -> ClassBlocks:
    """The class blocks of y; raises InputError for one class or a class too small."""
    classes, codes = class_codes(np.asarray(y))
    if classes.size < 2:
        raise InputError(
            f"y has a single class ({classes[0]!r}); the supervised Q-α (Def. 6) needs at "
            "least two classes — or fit without y for the unsupervised Q-α"
        )
    groups = [np.flatnonzero(codes == c) for c in range(classes.size)]
    sizes = [g.size for g in groups]
    need = max(k_within + 1, k_between)
    small = [str(classes[c]) for c, s in enumerate(sizes) if s < need]
    if small:
        raise InputError(
            f"class(es) {', '.join(small)} have fewer than {need} samples; the supervised Q-α "
            f"needs k_within + 1 = {k_within + 1} samples per class (lower k_within)"
        )
    bounds = np.r_[0, np.cumsum(sizes)]
    slices = [slice(int(bounds[c]), int(bounds[c + 1])) for c in range(classes.size)]
    nc = classes.size
    kk = {(g, h): (k_within if g == h else k_between) for g in range(nc) for h in range(nc)}
    return ClassBlocks(classes, groups, slices, kk)


@dataclasses.dataclass(kw_only=True)
class SupervisedState(Iterate, WarmStart):
    """The state of a Def. 6 loop: the Q^{gh} packed (:meth:`ClassBlocks.pack`) in ``Q``,
    their memory orders in ``orders``."""

    Q: np.ndarray
    orders: str


def initial_Qs(
    X: Any, blocks: ClassBlocks, restart: int, random_state: int | None, ex: Execution
) -> dict:
    """The Q^{gh} of the first iteration.

    The leading right singular subspaces of the blocks of A_α at uniform α (one pass over
    X); a restart after the first (``n_init > 1``) starts from seeded random Q^{gh} instead,
    without that pass.
    """
    sizes = [s.stop - s.start for s in blocks.slices]
    if restart > 0:
        rs = np.random.default_rng([random_state or 0, restart])
        return {
            (g, h): orth(rs.standard_normal((sizes[h], kk))) for (g, h), kk in blocks.kk.items()
        }
    A = uniform_affinity(X, blocks.prep, ex)
    sl = blocks.slices
    return {(g, h): right_singular(A[sl[g], sl[h]], kk) for (g, h), kk in blocks.kk.items()}


def supervised_step(
    solve: AlphaStep, s: SupervisedState, blocks: ClassBlocks, gamma: float, basic: bool
) -> np.ndarray:
    """One iteration of Def. 6: α from 𝒢 at the Q^{gh}, then each Q^{gh} from A_α's block.

    (5) says "max over Q^{gh}", but the text computes Q^{gh} "using the current estimates
    A^{gh}": the leading right singular subspace of A^{gh} (``basic``), or one
    orthogonal-iteration step on A^{gh}ᵀA^{gh} for g ≠ h, on A^{ll} for g = h.
    """
    Qs, sl = blocks.unpack(s.Q, s.orders), blocks.slices
    alpha, A, _ = solve(supervised_spec(Qs, sl, gamma, solve.dtype), s)
    val = 0.0
    for g, h in blocks.pairs:
        Agh = A[sl[g], sl[h]]
        if basic:
            Qs[g, h] = right_singular(Agh, blocks.kk[g, h])
        elif g == h:
            Qs[g, h] = orth(Agh @ Qs[g, h])
        else:
            Qs[g, h] = orth(Agh.T @ (Agh @ Qs[g, h]))
        e = criterion(Agh, Qs[g, h])
        val += e if g == h else -gamma * e
    s.objective.append(val)
    s.Q, s.orders = blocks.pack(Qs)
    return alpha


def supervised_qalpha(
    X: Any,
    y: np.ndarray,
    *,
    k_within: int,
    k_between: int,
    gamma: float,
    basic: bool,
    max_iter: int,
    tol: float,
    alpha_solver: str,
    random_state: int | None,
    restart: int,
    ctx: FitContext,
) -> QAlphaRun:
    """One start of the supervised Q-α (Def. 6) on X with labels y.

    Parameters
    ----------
    X : ndarray or dask array (q × n, samples × features), X or X held by ``ctx.execution``
    y : ndarray (q,), class labels (at least two classes)
    k_within, k_between : int, k^{gh} for g = h and g ≠ h
    gamma : float, γ of criterion (5)
    basic : bool, Q^{gh} as exact singular subspaces (the basic scheme) instead of power steps
    max_iter, tol, alpha_solver, random_state, restart, ctx : as for
        :func:`~fsdask.methods.qalpha.linear.linear_qalpha`

    Returns
    -------
    QAlphaRun with Q the dict {(class g, class h): Q^{gh}}.  Memory: as the unsupervised run.
    """
    blocks = class_blocks(np.asarray(y), k_within, k_between)
    Qs = initial_Qs(X, blocks, restart, random_state, ctx.execution)
    solve = AlphaStep(X, blocks.prep, alpha_solver, ctx.execution)
    Q, orders = blocks.pack(Qs)
    state = SupervisedState(Q=Q, orders=orders, rng=np.random.default_rng(random_state))

    def update(s: SupervisedState) -> np.ndarray:
        return supervised_step(solve, s, blocks, float(gamma), basic)

    loop = iterate_alpha(
        ctx, f"qalpha/supervised/restart{restart}", state, update, max_iter=max_iter, tol=tol
    )
    attrs = {
        "variant": "supervised",
        "gamma": float(gamma),
        "k_within": int(k_within),
        "k_between": int(k_between),
        "classes": [str(c) for c in blocks.classes],
        "gram_dtype": str(solve.dtype),
    }
    Qs = blocks.unpack(loop.state.Q, loop.state.orders)
    return run_of(loop, Q=blocks.labelled(Qs), attrs=attrs)
