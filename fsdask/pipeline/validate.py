"""Every step checked before any step runs: methods, their parameters, and where steps write.

:func:`check_steps` refuses, naming the step and what to do,

* a step whose ``method`` is not in :data:`fsdask.methods.REGISTRY`, whose ``param`` names a
  parameter the method does not have (the closest one suggested) or gives one a value
  outside its allowed range (the estimator is built and its constraints checked; nothing is
  fitted), or whose ``confidence`` block has an unknown key or a value out of range (the
  stability / FDR wrappers are built and checked the same way);
* two outputs, of one step or of two, at the same place (or one inside the other): the
  later step would replace what the earlier one is recorded as having written;
* an output that is an input of the same step or of an earlier one: each run would feed that
  step what the previous run wrote.  An output that a *later* step reads is a chain, the
  normal case;
* an output onto (or around) the run's own state, history, lock or JSON log file.

Locations are compared normalised (:meth:`fsdask.io.location.Location.overlaps`: absolute,
symbolic links resolved), relative to the config's folder (the caller's working folder).
"""

from __future__ import annotations

import difflib
from typing import Any, Sequence

from fsdask.errors import FsdaskError, ParameterError, StepInvalid
from fsdask.io.location import Location


def closest(name: str, valid: Sequence[str]) -> str:
    """``" (did you mean 'x'?)"`` for the valid name closest to ``name``, or ``""``.

    Parameters
    ----------
    name : str
        The name written.
    valid : sequence of str
        The names accepted.

    Returns
    -------
    str
    """
    match = difflib.get_close_matches(str(name), [str(v) for v in valid], 1, 0.6)
    return f" (did you mean {match[0]!r}?)" if match else ""


def check_method(i: int, step, kwargs: dict[str, Any]) -> None:
    """Build the estimator of a step that names a ``method`` and check its parameters.

    Parameters
    ----------
    i : int
        The step's number (from 1).
    step : Step
        The step.
    kwargs : dict
        Its keyword arguments (:func:`fsdask.pipeline.config.step_kwargs`).

    Raises
    ------
    StepInvalid
        An unknown method, an unknown parameter name (the closest one suggested), a value
        the method does not accept, or a ``confidence`` block that
        :func:`fsdask.api.select.confident` or the wrappers it builds refuse.
    """
    method = kwargs.get("method")
    if method is None:
        return
    from fsdask.methods import REGISTRY, get_method

    params = dict(kwargs.get("params") or {})
    try:
        if str(method).lower().replace("-", "_") not in REGISTRY:
            raise ParameterError(
                f"unknown method {method!r}{closest(str(method).lower(), list(REGISTRY))}; "
                f"known: {', '.join(REGISTRY)}"
            )
        names = get_method(str(method)).get_params(deep=False)
        unknown = [k for k in params if k not in names]
        if unknown:
            raise ParameterError(
                f"method {method!r} has no parameter {unknown[0]!r}{closest(unknown[0], names)}; "
                f"its parameters: {', '.join(sorted(names))}"
            )
        est = get_method(str(method), **params)
        _check_constraints(est)
        if kwargs.get("confidence") is not None:
            _check_confidence(est, kwargs["confidence"])
    except (FsdaskError, ValueError, TypeError) as exc:
        text = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise StepInvalid(
            f"step {i} ({step.name}) failed: {text} — found before any step ran; "
            "fix the step's `method` / `param` and run again"
        ) from None


def _check_constraints(est) -> None:
    """scikit-learn's declared constraints of ``est``, checked without data."""
    check = getattr(est, "_validate_params", None)
    if check is not None:
        check()


def _check_confidence(est, confidence) -> None:
    """Build the FDR / Stability wrappers a ``confidence`` block asks for and check them, so
    a typo there stops the run before its first step rather than after the earlier steps."""
    from fsdask.api.select import confident

    if not isinstance(confidence, dict):
        raise ParameterError(
            f"confidence: a mapping such as {{stability: 100}} or {{fdr: 0.05}}, not {confidence!r}"
        )
    wrapped = confident(est, **confidence)
    while wrapped is not est:  # Stability(FDR(est)), FDR(est) or Stability(est)
        _check_constraints(wrapped)
        wrapped = wrapped.estimator


def _where(i: int, step) -> str:
    return f"step {i} ({step.name})"


def check_locations(steps: Sequence, storage_options=None, bookkeeping=()) -> None:
    """Refuse outputs that collide, that feed the same or an earlier step, or that would
    replace the run's own files.

    Parameters
    ----------
    steps : sequence of Step
        The pipeline's steps, in order.
    storage_options : mapping, optional
        The pipeline's default storage options.
    bookkeeping : sequence of (str, str)
        ``(what, path)`` of the run's own files (state, history, lock, JSON log).

    Raises
    ------
    ParameterError
        Naming both steps, the location and what to do.
    """
    own = [(what, Location.of(path)) for what, path in bookkeeping if path]
    written: list[tuple[int, Any, Location]] = []
    read: list[tuple[int, Any, Location]] = []
    for i, step in enumerate(steps, 1):
        outs = [Location.of(o, storage_options) for o in step.outputs()]
        ins = [Location.of(t, storage_options) for t in step.inputs()]
        read += [(i, step, loc) for loc in ins]
        for loc in outs:
            for j, other, prev in written:
                if loc.overlaps(prev):
                    who = (
                        f"{_where(i, step)} writes both {prev.shown} and {loc.shown}"
                        if j == i
                        else f"{_where(j, other)} and {_where(i, step)} both write {loc.shown}"
                        + ("" if prev.shown == loc.shown else f" (and {prev.shown})")
                    )
                    raise ParameterError(
                        f"{who}: the same place, or one inside the other — the later output "
                        "would replace what the earlier one is recorded as; give each output "
                        "its own path"
                    )
            for j, other, src in reversed(read):  # its own inputs first
                if loc.overlaps(src):
                    what = "its own input" if j == i else f"an input of {_where(j, other)}"
                    raise ParameterError(
                        f"{_where(i, step)} writes {loc.shown}, which is {what} ({src.shown}); "
                        "a step may read only what earlier steps write — choose another output "
                        "path, or move the reading step after the writing one"
                    )
            for what, path in own:
                if loc.overlaps(path):
                    raise ParameterError(
                        f"{_where(i, step)} writes {loc.shown}, where the run keeps its {what} "
                        f"({path.shown}); choose another output path, or set `state:` "
                        "elsewhere"
                    )
            written.append((i, step, loc))
