"""CPFS's selections on the paper's own data sets against an independent solver of the paper's
QP (5.5) in cvxpy (``tests/cpfs_cvxpy_reference.py``): standardised Boston housing (p = 13)
and ionosphere (p = 34, V2 constant), at every q: the rows the QP keeps at fsdask's λ and
at a λ of its own bisection with exactly q nonzero rows.  The data and CPFS options are those of
``examples/reproduce_cpfs_figures.py`` (the reconstruction curves of Figs. 2–9)."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("cvxpy")

import cpfs_cvxpy_reference as ref  # noqa: E402

import fsdask  # noqa: E402


@pytest.fixture
def figures(examples_import, shared_data):
    """The reproduction script as a module (its ``load_set`` and ``CPFS_KW``)."""
    return examples_import("reproduce_cpfs_figures", ["reproduce_cpfs_figures.py"])


def _fsdask(figures, X: np.ndarray, q: int) -> fsdask.CPFS:
    return fsdask.CPFS(n_features_to_select=q, **figures.CPFS_KW).fit(X)


def test_housing_scaled_every_q_equals_the_qp_on_its_own_lambda(figures):
    X, _, _ = figures.load_set("housing_scaled")
    qp = ref.QP55(X)
    # the reference's λ_max (the top of its bisection) is where the QP's solution leaves 0
    assert ref.support(qp.row_norms(1.001 * qp.lambda_max)).size == 0
    assert ref.support(qp.row_norms(0.99 * qp.lambda_max)).size == 1
    lam_prev = None  # the QP's λ with q − 1 rows: the top of the next bisection
    for q in range(1, X.shape[1]):
        sel = _fsdask(figures, X, q)
        theirs = ref.selection_at_q(qp, q, hi=lam_prev)
        lam_prev = theirs["lambda"]
        assert theirs["margin"] > 10.0, q  # the q rows stand clear of the solver's zeros
        np.testing.assert_array_equal(sel.get_support(indices=True), theirs["selected"], str(q))
        # at fsdask's λ: the same rows, and the certificate's primal is the QP's optimum
        A, obj = qp.solve(sel.lambda_)
        np.testing.assert_array_equal(theirs["selected"], ref.support(np.abs(A).max(axis=1)))
        assert sel.result_.attrs["primal"] == pytest.approx(obj, rel=2e-5)  # tol: 1e-5 gap


def test_ionosphere_every_q_equals_the_qp(figures):
    X, _, _ = figures.load_set("ionosphere")
    qp = ref.QP55(X)
    assert qp.lambda_max == pytest.approx(_fsdask(figures, X, 1).lambda_max_, rel=1e-12)
    lam_prev = None  # the QP's λ with q − 1 rows: the top of the next bisection
    for q in range(1, X.shape[1]):  # 33: V2 is constant, its row is zero at every λ
        sel = _fsdask(figures, X, q)
        ours = sel.get_support(indices=True)
        # at fsdask's λ the QP's nonzero rows are fsdask's, and its optimum fsdask's primal
        A, obj = qp.solve(sel.lambda_)
        norms = np.abs(A).max(axis=1)
        np.testing.assert_array_equal(ours, ref.support(norms), str(q))
        assert norms[1] <= ref.ZERO
        assert sel.result_.attrs["primal"] == pytest.approx(obj, rel=2e-5)
        # and on the QP's own λ (bisection on its solutions alone) the same q rows
        theirs = ref.selection_at_q(qp, q, hi=lam_prev)
        lam_prev = theirs["lambda"]
        assert theirs["margin"] > 10.0, q  # the q rows stand clear of the solver's zeros
        np.testing.assert_array_equal(ours, theirs["selected"], str(q))
