"""How to read a dataset other tools wrote: one value, carried whole.

Every command and :func:`fsdask.open_dataset` take the same handful of read options (which
matrix, which dims, which label, where a rechunked copy may go, how much memory a task may
use).  They travel as one frozen :class:`ReadOptions` instead of loose keywords, so a new
option is added here once and reaches every reader (scanpy's argument bundles for
``highly_variable_genes`` are the model).
"""

from __future__ import annotations

import dataclasses
from typing import Any

from fsdask.errors import InputError, ParameterError

#: what ``nan_policy`` accepts: refuse, replace by 0, by the feature's mean, or drop the feature
NAN_POLICIES = ("error", "zero", "mean", "drop-feature")

#: what ``layout`` accepts: keep a sample-chunked source by sample blocks, or re-block it by feature
LAYOUTS = ("auto", "features")


@dataclasses.dataclass(frozen=True)
class ReadOptions:
    """The options of reading one dataset (all optional; the defaults read fsdask stores).

    Parameters
    ----------
    variable : str, optional
        The matrix to read (default: ``X``, else the only 2-D variable); AnnData: ``X``,
        ``raw`` or ``layers/NAME``.
    sample_dim, feature_dim : str, optional
        Which dims hold samples and features, matched by name, never by position.
    label : str, optional
        The label variable along the sample dim (AnnData: an ``obs`` column,
        ``obs:cell_type``); default: one named as in :data:`fsdask.io.foreign.LABEL_NAMES`.
    drop_unlabelled : bool, default False
        Leave out samples whose label is missing instead of refusing the data.
    rechunk_to : str, optional
        Where a rechunked copy goes when the store's chunking cannot be re-blocked in
        memory (default: a temporary directory, removed at exit).
    memory_budget : int or str, optional
        Memory one task may use (bytes or ``"1GB"``; default: the dask config key
        ``fsdask.memory-budget``).
    nan_policy : {"error", "zero", "mean", "drop-feature"}, default "error"
        What to do with NaN/Inf values where the reader meets them (sparse AnnData, ingest).
    layout : {"auto", "features"}, default "auto"
        ``"auto"`` keeps a source stored by samples (AnnData CSR or dense ``X``, a dense
        Zarr store chunked by samples) in sample blocks, read as stored, with no copy;
        ``"features"`` re-blocks it into (all samples × feature block) blocks, through a
        copy when needed — what the methods that are not linear in the samples use.

    Examples
    --------
    >>> opts = ReadOptions(variable="layers/counts", label="obs:cell_type")
    >>> opts.replace(label=None).label is None
    True
    """

    variable: str | None = None
    sample_dim: str | None = None
    feature_dim: str | None = None
    label: str | None = None
    drop_unlabelled: bool = False
    rechunk_to: str | None = None
    memory_budget: Any = None
    nan_policy: str = "error"
    layout: str = "auto"

    def __post_init__(self) -> None:
        self.validate()

    def validate(self) -> ReadOptions:
        """Check the values; raise :class:`~fsdask.errors.ParameterError` naming the option.

        Returns
        -------
        ReadOptions
            ``self``, so a caller may write ``opts.validate().variable``.
        """
        for name in ("variable", "sample_dim", "feature_dim", "label", "rechunk_to"):
            value = getattr(self, name)
            if value is not None and (not isinstance(value, str) or not value.strip()):
                raise ParameterError(f"{name}={value!r}: expected a non-empty string or None")
        if self.sample_dim is not None and self.sample_dim == self.feature_dim:
            # about the data's dims, so the error of bad input (what the readers always raised)
            raise InputError(
                f"sample_dim and feature_dim are both {self.sample_dim!r}; name two different dims"
            )
        if not isinstance(self.drop_unlabelled, bool):
            raise ParameterError(
                f"drop_unlabelled={self.drop_unlabelled!r}: expected True or False"
            )
        if self.nan_policy not in NAN_POLICIES:
            raise ParameterError(
                f"nan_policy={self.nan_policy!r}: expected one of {', '.join(NAN_POLICIES)}"
            )
        if self.layout not in LAYOUTS:
            raise ParameterError(f"layout={self.layout!r}: expected one of {', '.join(LAYOUTS)}")
        if self.memory_budget is not None:
            from fsdask._config import memory_budget

            memory_budget(self.memory_budget)  # raises a ParameterError naming the value
        return self

    def replace(self, **changes: Any) -> ReadOptions:
        """A copy with ``changes`` applied (and validated)."""
        return dataclasses.replace(self, **changes)

    @classmethod
    def of(cls, options: ReadOptions | None = None, **loose: Any) -> ReadOptions:
        """``options`` with the loose keywords that are not None applied on top.

        The door for callers that still pass single keywords (``open_dataset(url,
        variable="X")``): they become one value here, and nothing below sees them loose.
        """
        base = options if options is not None else cls()
        given = {k: v for k, v in loose.items() if v is not None}
        unknown = sorted(set(given) - {f.name for f in dataclasses.fields(cls)})
        if unknown:
            raise ParameterError(f"unknown read option(s): {', '.join(unknown)}")
        return base.replace(**given) if given else base

    def as_dict(self) -> dict[str, Any]:
        """The options that differ from the defaults (for provenance and logs)."""
        default = ReadOptions()
        return {
            f.name: getattr(self, f.name)
            for f in dataclasses.fields(self)
            if getattr(self, f.name) != getattr(default, f.name)
        }
