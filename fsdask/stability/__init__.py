"""Selections with stated confidence: stability selection and false-discovery-rate control.

* :class:`Stability` — refit any selector on subsamples (complementary pairs), keep the
  features selected often enough, with a bound on the expected number of false selections;
* :class:`FDR` — select at a false discovery rate q (Benjamini–Hochberg / –Yekutieli) on a
  filter's p-values or on permutation p-values.

Layer 2 (as :mod:`fsdask.methods`): both are :class:`~fsdask.base.Selector` s wrapping
another one.  A filter's resamples or permutations share one pass over X
(:mod:`fsdask.stability.onepass`), and so do SparseHSIC's resamples
(:mod:`fsdask.stability.hsicpass`, :mod:`fsdask.stability.hsictop`); other selectors are refitted as parallel tasks
(:mod:`fsdask.stability.refit`).
"""

from fsdask.stability.estimator import Stability
from fsdask.stability.fdr import FDR, adjust, permutation_pvalues
from fsdask.stability.resample import (
    draw_subsamples,
    error_bound,
    frequency_interval,
    stability_path,
)

__all__ = [
    "FDR",
    "Stability",
    "adjust",
    "draw_subsamples",
    "error_bound",
    "frequency_interval",
    "permutation_pvalues",
    "stability_path",
]
