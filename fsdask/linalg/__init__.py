"""The Dask building blocks every method uses.

* :mod:`.reductions` — per-feature maps and tree-summed reductions over feature blocks;
* :mod:`.pairwise` — sample × sample distances/kernels accumulated over feature blocks,
  and feature × feature kernels applied tile by tile;
* :mod:`.absdiff` — fused numba kernels on |x_n − x_i| per feature block (weighted
  Manhattan distances, Π-weighted transforms Σ_i Π_ni |x_nj − x_ij|);
* :mod:`.tsqr` — tall-skinny QR/SVD and Khatri–Rao Grams;
* :mod:`.eigen` — matrix-free symmetric eigensolvers whose mat-vec is one pass;
* :mod:`.prox` — row-wise ℓ1-ball projection and the prox of the ℓ∞ norm (numba, no sort);
* :mod:`.tall` — a tall m × c matrix (in memory or chunked by rows): one implementation
  per array kind of the row-wise operations a method needs on it;
* :mod:`.execution` — the one place that decides in memory vs dask and persist vs
  recompute against one memory budget (``fsdask.memory-budget``), and counts passes over X;
* :mod:`.threads` — the one core count (``cores()``), the one thread pool
  (``parallel_map``) and the BLAS threads of a fit (``fit_threads``).

Methods say *what* is computed; these functions say *how* the big matrix is swept.
"""

from fsdask.linalg.absdiff import (
    absdiff_transform,
    manhattan_over_blocks,
    pi_weighted_absdiff,
    weighted_absdiff_sum,
    weighted_manhattan,
)
from fsdask.linalg.eigen import dask_operator, leading_eigh
from fsdask.linalg.execution import Execution, fits, memory_budget
from fsdask.linalg.pairwise import (
    feature_kernel_matmul,
    pairwise_block,
    sample_pairwise,
)
from fsdask.linalg.prox import l1_ball_thresholds, project_l1_ball_rows, prox_linf_rows
from fsdask.linalg.reductions import (
    feature_dot,
    map_and_sum,
    map_features,
    row_dot,
    row_dot_summary,
    row_l1_bound,
    row_l1_norms,
    row_l1_norms_screened,
    sample_dot,
    sum_over_blocks,
)
from fsdask.linalg.tsqr import (
    gram_factor,
    khatri_rao,
    khatri_rao_gram,
    khatri_rao_gram_block,
    khatri_rao_matvec,
    khatri_rao_rmatvec,
    tall_skinny_qr,
    tall_skinny_svd,
)

__all__ = [
    "map_features",
    "sum_over_blocks",
    "map_and_sum",
    "feature_dot",
    "row_dot",
    "row_dot_summary",
    "sample_dot",
    "row_l1_bound",
    "row_l1_norms",
    "row_l1_norms_screened",
    "sample_pairwise",
    "feature_kernel_matmul",
    "pairwise_block",
    "weighted_manhattan",
    "pi_weighted_absdiff",
    "weighted_absdiff_sum",
    "manhattan_over_blocks",
    "absdiff_transform",
    "tall_skinny_qr",
    "tall_skinny_svd",
    "khatri_rao",
    "khatri_rao_gram",
    "khatri_rao_gram_block",
    "khatri_rao_matvec",
    "khatri_rao_rmatvec",
    "gram_factor",
    "leading_eigh",
    "dask_operator",
    "l1_ball_thresholds",
    "project_l1_ball_rows",
    "prox_linf_rows",
    "Execution",
    "fits",
    "memory_budget",
]
