"""Q-α: spectral feature weighting of Wolf & Shashua (JMLR 2005), linear in the number of features.

α, the feature weights, is the leading eigenvector of G (never formed) alternating with Q,
the leading eigenvectors of the affinity A_α.  The notation, the equations and where the
paper is misprinted or silent are in :mod:`.core`'s docstring.

* :mod:`.core` — :func:`qalpha_weights`, the door: the starts of a variant, the kept one;
* :mod:`.linear` — Def. 2–5 (power, basic, Ritz, Laplacian, gap), one function per iteration;
* :mod:`.supervised` — Def. 6 over class blocks;  :mod:`.kernel` — Def. 14 and its kernels;
* :mod:`.alpha` — the α-step (Gram, TSQR or Lanczos of the tall W) and A_α, by the seam;
* :mod:`.tall` — §2.1's preprocessing and each variant's tall matrix W;
* :mod:`.loop` — the loop state, convergence on ‖Δα‖, a run's result;
* :mod:`.estimator` — :class:`QAlpha`, the scikit-learn estimator over :func:`qalpha_weights`.
"""

from fsdask.methods.qalpha.core import auto_cut, qalpha_weights
from fsdask.methods.qalpha.estimator import VARIANTS, QAlpha
from fsdask.methods.qalpha.kernel import KERNELS, kernel_qalpha, make_kernel, sessions_kernel
from fsdask.methods.qalpha.linear import (
    basic_step,
    gap_step,
    laplacian_step,
    linear_qalpha,
    power_step,
    ritz_step,
)
from fsdask.methods.qalpha.loop import QAlphaRun
from fsdask.methods.qalpha.supervised import supervised_qalpha, supervised_step
from fsdask.methods.qalpha.tall import (
    class_normalize_block,
    gap_spec,
    laplacian_spec,
    normalize_block,
    standard_spec,
    supervised_spec,
)

__all__ = [
    "QAlpha",
    "qalpha_weights",
    "QAlphaRun",
    "linear_qalpha",
    "power_step",
    "basic_step",
    "ritz_step",
    "laplacian_step",
    "gap_step",
    "supervised_qalpha",
    "supervised_step",
    "kernel_qalpha",
    "make_kernel",
    "sessions_kernel",
    "auto_cut",
    "normalize_block",
    "class_normalize_block",
    "standard_spec",
    "laplacian_spec",
    "gap_spec",
    "supervised_spec",
    "VARIANTS",
    "KERNELS",
]
