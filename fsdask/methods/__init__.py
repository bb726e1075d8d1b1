"""Feature-selection methods: one package per paper, modules for the baselines.

Each paper method (``qalpha``, ``logo``, ``hsic``, ``cpfs``) is a package whose core
functions implement the paper's algorithms (public, taking the fit's
:class:`~fsdask.fitting.FitContext`) and whose estimator module is thin: it validates, calls
its core and builds the :class:`~fsdask.base.FitOutput`.  ``filters`` and ``pca_based``
hold the baselines.

The registry maps the names used by ``fsdask select --method NAME`` to estimator classes
(imported lazily).  Each entry is ``name: ("module", "Class", {fixed keyword arguments})``.
"""

from __future__ import annotations

import importlib
from typing import Any

from fsdask.errors import ParameterError

FILTER_SCORES = ("variance", "pearson", "fisher", "f", "ttest", "snr", "fold_change", "ks")

REGISTRY: dict[str, tuple[str, str, dict[str, Any]]] = {
    **{s: ("fsdask.methods.filters", "Filter", {"statistic": s}) for s in FILTER_SCORES},
    "laplacian_score": ("fsdask.methods.filters", "LaplacianScore", {}),
    "qalpha": ("fsdask.methods.qalpha", "QAlpha", {}),
    "logo": ("fsdask.methods.logo", "Logo", {}),
    "hsic": ("fsdask.methods.hsic", "SparseHSIC", {}),
    "cpfs": ("fsdask.methods.cpfs", "CPFS", {}),
    "jolliffe_i": ("fsdask.methods.pca_based", "JolliffeI", {}),
    "jolliffe_ni": ("fsdask.methods.pca_based", "JolliffeNI", {}),
    "pfa": ("fsdask.methods.pca_based", "PFA", {}),
    "spca": ("fsdask.methods.pca_based", "SparsePCASelector", {}),
}


def available_methods() -> list[str]:
    """The method names accepted by :func:`get_method` and ``--method``.

    Only methods whose module imports in this installation are listed.

    Returns
    -------
    list of str
        Registered names, in the order ``fsdask select --help`` lists them.

    Examples
    --------
    >>> import fsdask
    >>> names = fsdask.available_methods()
    >>> names[:3], "logo" in names
    (['variance', 'pearson', 'fisher'], True)
    """
    out = []
    for name, (mod, cls, _) in REGISTRY.items():
        try:
            if hasattr(importlib.import_module(mod), cls):
                out.append(name)
        except ImportError:
            pass
    return out


def get_method(name: str, **params: Any):
    """Instantiate the estimator registered as ``name`` (what ``--method NAME`` runs).

    Parameters
    ----------
    name : str
        A name of :func:`available_methods` (case and ``-``/``_`` are ignored).
    **params
        Parameters of the estimator; a filter's ``statistic`` is fixed by its name.

    Returns
    -------
    sklearn.base.BaseEstimator
        The unfitted estimator.

    Raises
    ------
    ParameterError
        For an unknown name or a parameter the estimator does not take.

    Examples
    --------
    >>> import fsdask
    >>> est = fsdask.get_method("ttest", n_features_to_select=50)
    >>> type(est).__name__, est.statistic
    ('Filter', 'ttest')
    >>> fsdask.get_method("logo", sigma=1.0)
    Logo(sigma=1.0)
    """
    key = name.lower().replace("-", "_")
    if key not in REGISTRY:
        raise ParameterError(
            f"unknown method {name!r}; available: {', '.join(available_methods())}"
        )
    mod, cls, fixed = REGISTRY[key]
    try:
        klass = getattr(importlib.import_module(mod), cls)
    except (ImportError, AttributeError) as exc:
        raise ParameterError(
            f"method {name!r} is not available in this installation ({exc})"
        ) from exc
    try:
        return klass(**{**fixed, **params})
    except TypeError as exc:
        raise ParameterError(
            f"method {name!r}: bad parameter ({exc}); see `fsdask select --help` "
            f"and the docstring of fsdask.{cls}"
        ) from exc
