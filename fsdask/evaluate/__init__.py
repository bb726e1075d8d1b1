"""Judge a selection the way the papers did.

* :func:`evaluate` — LOO / stratified k-fold cross-validation of a selector with a linear SVM
  or KNN, selection refit inside each fold (honest) or once on all data (labelled);
  error as a function of the number of top-ranked features fed in; stability across folds.
* :func:`evaluate_result` — the same for a saved result's ranking.
* metrics — :func:`false_discovery_rate`, :func:`sparsity_gap`, :func:`kuncheva_index`,
  :func:`jaccard_stability`, :func:`reconstruction_error`, :func:`reconstruction_curve`,
  :func:`pev`.

scikit-learn is needed only for the classifiers (optional dependency: ``fsdask[eval]``).
"""

from fsdask.errors import MissingDependencyError
from fsdask.evaluate.metrics import (
    false_discovery_rate,
    jaccard_stability,
    kuncheva_index,
    pev,
    reconstruction_curve,
    reconstruction_error,
    sparsity_gap,
)
from fsdask.evaluate.protocol import (
    EvaluationResult,
    check_labels,
    evaluate,
    evaluate_classifiers,
    evaluate_result,
    open_evaluation,
    ranking_of,
    write_evaluation,
)

__all__ = [
    "evaluate",
    "evaluate_classifiers",
    "evaluate_result",
    "EvaluationResult",
    "MissingDependencyError",
    "write_evaluation",
    "open_evaluation",
    "check_labels",
    "ranking_of",
    "false_discovery_rate",
    "sparsity_gap",
    "kuncheva_index",
    "jaccard_stability",
    "reconstruction_error",
    "reconstruction_curve",
    "pev",
]
