"""HSIC feature selection with the sparse power method and rank-one downdate (R1D).

Zarkoob, *Feature selection for gene expression data based on Hilbert-Schmidt
independence criterion*, MMath thesis, Waterloo 2010, chapter 3.

The thesis writes X as m features × n samples; fsdask stores X as (sample, feature), so
the thesis' ``X`` is our ``Xᵀ`` and its row i (a feature) is our column i.

* :mod:`.response` — Δ, the factor of the response kernel B = Δᵀ Δ (step 1, §3.4);
* :mod:`.matrix` — A = X H Δᵀ/(n − 1) in one pass over X, sums over its sample or feature
  blocks (step 2; eq. 3.1–3.3, the scale);
* :mod:`.sparsepm` — ``SparsePM`` (eq. 3.4–3.6) and ``PowerMethod`` (§3.3.1);
* :mod:`.components` — R1D rounds, each on A downdated by the components before;
* :mod:`.rho` — ρ: its noise level, the ρ path and the bisection for k features;
* :mod:`.estimator` — :class:`SparseHSIC` (``FeatureSelection``), the thin estimator;

The core functions take A as NumPy or as a dask array chunked by rows
(:mod:`fsdask.linalg.tall`); the looping ones take the fit's ``ctx`` (None outside a fit).
"""

from fsdask.methods.hsic.components import downdate, r1d, selection
from fsdask.methods.hsic.estimator import SparseHSIC
from fsdask.methods.hsic.matrix import hsic_matrix, hsic_pass, hsic_sums, scaled_A
from fsdask.methods.hsic.response import (
    MAX_CLASS_SHARE,
    RBF_MAX_RANK,
    RBF_TRACE_SHARE,
    Response,
    infer_response,
    response_factor,
)
from fsdask.methods.hsic.rho import (
    PATH_MAX_ROWS,
    RHO_ALPHA,
    rho_for_k,
    rho_max,
    rho_noise,
    rho_path,
)
from fsdask.methods.hsic.sparsepm import (
    SparsePMResult,
    power_method,
    sparse_pm,
    sparse_pm_rows,
)

__all__ = [
    "SparseHSIC",
    "Response",
    "infer_response",
    "response_factor",
    "hsic_matrix",
    "hsic_pass",
    "hsic_sums",
    "scaled_A",
    "SparsePMResult",
    "sparse_pm",
    "sparse_pm_rows",
    "power_method",
    "downdate",
    "r1d",
    "selection",
    "rho_max",
    "rho_noise",
    "rho_path",
    "rho_for_k",
    "RBF_TRACE_SHARE",
    "RBF_MAX_RANK",
    "MAX_CLASS_SHARE",
    "PATH_MAX_ROWS",
    "RHO_ALPHA",
]
