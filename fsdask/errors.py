"""Exceptions raised by fsdask.

Every error says *what* is wrong, *where*, and *what to do*.  They derive from the
builtin exception a user would expect (``ValueError`` for bad input, ``OSError`` for
storage problems), so ``except ValueError`` keeps working, and from
:class:`FsdaskError`, so the CLI can turn any of them into a one-line message.
"""

from __future__ import annotations

from sklearn.exceptions import ConvergenceWarning as _SklearnConvergenceWarning


class FsdaskError(Exception):
    """Base class of all fsdask errors.

    Every error fsdask raises on purpose derives from it; its message is one line saying what
    is wrong, where, and what to do.  The command line prints that line and exits with status
    2 (75 for a held pipeline lock); anything else is a bug (exit 1).

    Examples
    --------
    >>> import fsdask
    >>> try:
    ...     fsdask.get_method("no-such-method")
    ... except fsdask.FsdaskError as err:
    ...     print(type(err).__name__)
    ParameterError
    """


class InputError(FsdaskError, ValueError):
    """The data given to an estimator or a command is not usable as it is.

    NaN or Inf values, a single class, labels of the wrong length, non-numeric columns,
    empty input.  Also a :class:`ValueError`, as scikit-learn expects.

    Examples
    --------
    >>> import numpy as np
    >>> import fsdask
    >>> X = np.random.default_rng(0).normal(size=(6, 4))
    >>> try:
    ...     fsdask.Filter(statistic="ttest").fit(X, [0, 0, 0, 0, 0, 0])
    ... except fsdask.InputError as err:
    ...     print(err)
    y has a single class (...); a supervised method needs at least two classes
    """


class InputTypeError(InputError, TypeError):
    """The data given has values of the wrong type (e.g. strings where numbers are needed)."""


class ParameterError(FsdaskError, ValueError):
    """A parameter is out of its allowed range or of the wrong kind.

    Raised by ``fit`` (the estimators' parameters are checked there, as in scikit-learn) and
    by the commands; the message names the parameter.

    Examples
    --------
    >>> import numpy as np
    >>> import fsdask
    >>> X = np.random.default_rng(0).normal(size=(6, 4))
    >>> try:
    ...     fsdask.Filter(n_features_to_select=-1).fit(X, [0, 1, 0, 1, 0, 1])
    ... except fsdask.ParameterError as err:
    ...     print("n_features_to_select" in str(err))
    True
    """


class StoreError(FsdaskError, OSError):
    """A store is missing, unreachable, empty, incomplete or not an fsdask dataset.

    Also an :class:`OSError`.  A corrupted chunk is one too: the message names the store and
    the features that could not be read.

    Examples
    --------
    >>> import fsdask
    >>> try:
    ...     fsdask.open_dataset("no-such-store.zarr")
    ... except fsdask.StoreError as err:
    ...     print(str(err).split(";")[0])
    no-such-store.zarr: no such file or directory
    """


class ConvergenceWarning(_SklearnConvergenceWarning):
    """An iterative method stopped at ``max_iter`` before meeting its tolerance.

    A subclass of scikit-learn's, so scikit-learn's usual filter
    (``warnings.simplefilter("ignore", sklearn.exceptions.ConvergenceWarning)``) silences
    fsdask's too, e.g. inside a ``GridSearchCV``.
    """


class ClusterError(FsdaskError, OSError):
    """The Dask cluster is unreachable, is not a Dask scheduler, or cannot keep workers alive."""


class MissingDependencyError(FsdaskError, ImportError):
    """An optional dependency (scikit-learn, matplotlib, anndata…) is not installed."""


class Locked(FsdaskError):
    """Another run of the same pipeline holds its lock; ``exit_code`` is 75 (EX_TEMPFAIL:
    try again later)."""

    exit_code = 75


class StepFailed(FsdaskError):
    """A pipeline step failed; ``exit_code`` is what the CLI returns.

    Parameters
    ----------
    message : str
        One line naming the step and the reason.
    exit_code : int
        2 for bad input, 1 for a bug, 75 when another run holds the lock.
    """

    def __init__(self, message: str, exit_code: int = 2):
        super().__init__(message)
        self.exit_code = exit_code


class StepInvalid(StepFailed, ParameterError):
    """A step that would fail on its options, found before any step ran (exit status 2)."""


class DriftAlert(StepFailed):
    """A step's selection drifted below its ``alert_on_drift`` Jaccard threshold against the
    previous run; raised after every step ran and was recorded.  ``exit_code`` is 3, so a
    scheduler sees the run fail while its results are in place."""

    def __init__(self, message: str):
        super().__init__(message, exit_code=3)


def import_optional(module: str, extra: str, purpose: str):
    """Import an optional dependency, or say in one line why it cannot be used.

    A package that is missing and one that is installed but fails to import (a version that
    does not match numpy or zarr, a broken install) need different remedies, so the message
    tells them apart and carries the real cause.

    Parameters
    ----------
    module : str
        What to import (``"anndata"``, ``"matplotlib.pyplot"``).
    extra : str
        The fsdask extra that installs it (``"h5ad"``).
    purpose : str
        What needs it, for the message (``"reading AnnData"``).

    Returns
    -------
    module

    Raises
    ------
    MissingDependencyError
    """
    import importlib

    top = module.split(".")[0]
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as exc:
        if (exc.name or "").split(".")[0] == top:
            raise MissingDependencyError(
                f"{purpose} needs {top}, which is not installed: pip install 'fsdask[{extra}]'"
            ) from exc
        cause = exc
    except (
        ImportError,
        ValueError,
        AttributeError,
        TypeError,
    ) as exc:  # h5py/numpy ABI: ValueError
        cause = exc
    raise MissingDependencyError(
        f"{purpose} needs {top}, which is installed but does not import "
        f"({type(cause).__name__}: {cause}); install versions that match: "
        f"pip install -U 'fsdask[{extra}]'"
    ) from cause
