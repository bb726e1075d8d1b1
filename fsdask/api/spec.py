"""What a command reads and writes, declared next to its function.

A command function is decorated with :func:`command`, which attaches a :class:`Command`
naming the parameters that hold the locations it writes (``outputs``), the datasets and files
it reads (``inputs``) and the read options it accepts (``reads``).  The pipeline asks these
declarations what a step writes and reads; it never guesses from option names.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable, Mapping

#: the read options of every command that reads a dataset other tools may have written
#: (fields of :class:`fsdask.io.options.ReadOptions`)
DATA_READS = (
    "variable",
    "sample_dim",
    "feature_dim",
    "label",
    "drop_unlabelled",
    "rechunk_to",
    "memory_budget",
    "nan_policy",
)


@dataclasses.dataclass(frozen=True)
class Command:
    """The declaration of one command function.

    Parameters
    ----------
    name : str
        The subcommand (``fsdask NAME``) and pipeline step key.
    function : callable
        The plain Python function that does the work.
    outputs : tuple of str
        Parameters whose values are locations the command writes.
    inputs : tuple of str
        Parameters whose values are datasets or files the command reads (a parameter may hold
        one location or a list of them).
    reads : tuple of str
        The :class:`~fsdask.io.options.ReadOptions` fields the command accepts (its ``read``
        parameter); empty when it reads no foreign dataset.
    step : bool
        Whether the command may be a pipeline step.
    result : str, optional
        The output parameter holding a selection result (its top features go into a
        pipeline's run history).
    """

    name: str
    function: Callable[..., Any]
    outputs: tuple[str, ...] = ()
    inputs: tuple[str, ...] = ()
    reads: tuple[str, ...] = ()
    step: bool = True
    result: str | None = None

    def outputs_of(self, kwargs: Mapping[str, Any]) -> list[str]:
        """The locations that a call with ``kwargs`` writes, in declaration order.

        Parameters
        ----------
        kwargs : mapping
            The call's keyword arguments (parameter names, not command-line spellings).

        Returns
        -------
        list of str
        """
        return _values(self.outputs, kwargs)

    def inputs_of(self, kwargs: Mapping[str, Any]) -> list[str]:
        """The datasets and files that a call with ``kwargs`` reads, in declaration order.

        Parameters
        ----------
        kwargs : mapping
            The call's keyword arguments (parameter names, not command-line spellings).

        Returns
        -------
        list of str
        """
        return _values(self.inputs, kwargs)


def _values(names: tuple[str, ...], kwargs: Mapping[str, Any]) -> list[str]:
    out: list[str] = []
    for name in names:
        value = kwargs.get(name)
        if value is None:
            continue
        out += [str(v) for v in value] if isinstance(value, (list, tuple)) else [str(value)]
    return out


def command(
    name: str | None = None,
    *,
    outputs: tuple[str, ...] = (),
    inputs: tuple[str, ...] = (),
    reads: tuple[str, ...] = (),
    step: bool = True,
    result: str | None = None,
) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Declare a function as a command: ``func.command`` becomes its :class:`Command`.

    Parameters
    ----------
    name : str, optional
        The command's name (default: the function's).
    outputs, inputs, reads, step, result
        As in :class:`Command`.

    Returns
    -------
    callable
        The decorator; it returns the function unchanged apart from the attribute.
    """

    def declare(func: Callable[..., Any]) -> Callable[..., Any]:
        func.command = Command(name or func.__name__, func, outputs, inputs, reads, step, result)
        return func

    return declare
