"""Test helpers for fsdask selectors: the shared :class:`SelectorChecks` suite and the
scikit-learn ``check_estimator`` checks that cannot apply to a selector."""

from __future__ import annotations

from typing import Any

__all__ = ["SelectorChecks", "expected_failed_checks"]


def expected_failed_checks(estimator: Any) -> dict[str, str]:
    """Checks of ``sklearn.utils.estimator_checks.check_estimator`` that cannot apply to
    ``estimator``, with a one-line reason each (pass as ``expected_failed_checks=``).

    Every fsdask estimator passes every check, so this is empty; it stays the one place a
    check that cannot apply would be named, with its reason.
    """
    return {}


def __getattr__(name: str):
    if name == "SelectorChecks":  # imports pytest: only when asked for
        from fsdask.testing.selector import SelectorChecks

        return SelectorChecks
    raise AttributeError(name)
