"""Convex principal feature selection (CPFS) — Masaeli, Yan, Cui, Fung & Dy, SDM 2010.

CPFS reconstructs X from a few of its own columns, ``min_A ‖X − XA‖²_F + λ Σ_i ‖a_i‖_∞``
(eq. 4.2), and selects the features whose row of A is nonzero; it is solved to a duality-gap
certificate along a warm-started λ path.  The modules, bottom up:

* :mod:`~fsdask.methods.cpfs.problem` — the data of (4.2) through a small factor B of X,
  the certificate, and the preparation of X (centring, duplicate columns, factor);
* :mod:`~fsdask.methods.cpfs.solvers` — FISTA, the paper's QP (5.5) and block-coordinate
  descent on a working set of rows, and one λ solved to its KKT conditions;
* :mod:`~fsdask.methods.cpfs.path` — :func:`cpfs_path`, the λ path with the strong rule and
  the search for q rows: the work of a fit;
* :mod:`~fsdask.methods.cpfs.estimator` — :class:`CPFS`, which validates, calls
  :func:`cpfs_path` and builds the fit's output.
"""

from fsdask.linalg.prox import project_l1_ball_rows, prox_linf_rows
from fsdask.methods.cpfs.estimator import CPFS, DENSE_COEF_MAX_FEATURES
from fsdask.methods.cpfs.path import (
    BISECT_RTOL,
    EXPLAINED_MIN_GAIN,
    EXPLAINED_STOP,
    LAMBDA_MIN_RATIO_TALL,
    LAMBDA_MIN_RATIO_WIDE,
    MAX_FEATURES_DEFAULT,
    cpfs_path,
    entry_lambda,
)
from fsdask.methods.cpfs.problem import (
    MAX_SCAN_FLOPS_DEFAULT,
    Problem,
    Rows,
    centred_block,
    column_hashes,
    duplicate_columns,
    row_abs_max,
)
from fsdask.methods.cpfs.solvers import (
    SOLVERS,
    bcd_rows,
    fista_rows,
    project_linf_epigraph_rows,
    qp_rows,
    solve_lambda,
)

__all__ = [
    "BISECT_RTOL",
    "CPFS",
    "DENSE_COEF_MAX_FEATURES",
    "EXPLAINED_MIN_GAIN",
    "EXPLAINED_STOP",
    "LAMBDA_MIN_RATIO_TALL",
    "LAMBDA_MIN_RATIO_WIDE",
    "MAX_FEATURES_DEFAULT",
    "MAX_SCAN_FLOPS_DEFAULT",
    "SOLVERS",
    "Problem",
    "Rows",
    "bcd_rows",
    "centred_block",
    "column_hashes",
    "cpfs_path",
    "duplicate_columns",
    "entry_lambda",
    "fista_rows",
    "project_l1_ball_rows",
    "project_linf_epigraph_rows",
    "prox_linf_rows",
    "qp_rows",
    "row_abs_max",
    "solve_lambda",
]
