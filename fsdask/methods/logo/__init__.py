"""Logo: local-learning feature weighting (Sun, Todorovic & Goodison, TPAMI 2010).

Each sample's margin is decomposed into local pieces by its nearest misses and hits, made
probabilistic under the current feature weights; the weights solve an ℓ1-regularised
logistic problem on those margins, and the two steps alternate to a fixed point
(Algorithm 1), with features eliminated as their weight reaches 0 and the elimination
certified by the optimality condition of eq. 7.

* :mod:`.algorithm` — Algorithm 1 (:func:`logo_weights`, its state :class:`LogoState`);
* :mod:`.margins` — lines 3–4: distances, the miss/hit probabilities (eqs. 4–5, 20), Z̄
  (eq. 3), and X as the sweeps see it;
* :mod:`.inner` — lines 5–6: eq. 7 by L-BFGS-B, by the paper's v² descent (eqs. 9–10), on
  a working set, or loosely as the authors' ``Logo.m`` does;
* :mod:`.certify` — the certificate of elimination (§3.2, §4.2);
* :mod:`.estimator` — :class:`Logo`, the scikit-learn estimator.
"""

from fsdask.methods.logo.algorithm import (
    AUTHORS,
    CONVENTIONS,
    SOLVERS,
    LogoState,
    check_classes,
    logo_weights,
    weight_change,
)
from fsdask.methods.logo.certify import KKTBounds, kkt_block, violators
from fsdask.methods.logo.estimator import Logo
from fsdask.methods.logo.inner import (
    solve_lbfgs,
    solve_logo_m,
    solve_v2_gradient,
    solve_working_set,
)
from fsdask.methods.logo.margins import miss_hit_probabilities

__all__ = [
    "AUTHORS",
    "CONVENTIONS",
    "SOLVERS",
    "KKTBounds",
    "Logo",
    "LogoState",
    "check_classes",
    "kkt_block",
    "logo_weights",
    "miss_hit_probabilities",
    "solve_lbfgs",
    "solve_logo_m",
    "solve_v2_gradient",
    "solve_working_set",
    "violators",
    "weight_change",
]
