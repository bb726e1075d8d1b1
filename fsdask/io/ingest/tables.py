"""Readers of CSV/TSV tables: a row per sample (read whole) or a row per feature (streamed).

A table with a row per sample is read with pandas and returns the record that
:func:`fsdask.io.ingest.build.write_arrays` writes.  A table with a row per feature may have
millions of rows: :class:`FeatureRows` streams it ``batch`` rows at a time into the store,
one Zarr chunk (all samples × ``block`` features) at a time, so memory holds one chunk
buffer plus one batch whatever the number of rows.
"""

from __future__ import annotations

import contextlib
import hashlib
from pathlib import Path
from typing import Any, Mapping

import dask.array as da
import numpy as np
import xarray as xr
import zarr

from fsdask._validation import feature_block_size
from fsdask.errors import InputError
from fsdask.io.blocks import apply_nan_policy
from fsdask.io.ingest.build import build_dataset, integral_labels, is_missing
from fsdask.io.location import Location
from fsdask.io.options import ReadOptions
from fsdask.io.store import (
    FORMAT_ATTR,
    FORMAT_VERSION,
    atomic_store,
    checksum_encoding,
    combine_digests,
    mark_complete,
    provenance,
)


@contextlib.contextmanager
def csv_errors(path: Path, sep: str):
    """Turn pandas' parse and decode failures into one-line InputErrors."""
    import pandas as pd

    try:
        yield
    except pd.errors.ParserError as exc:
        raise InputError(
            f"{path}: malformed CSV ({' '.join(str(exc).split())}); check the separator "
            "(--sep) and that every row has as many fields as the header"
        ) from None
    except UnicodeDecodeError as exc:
        raise InputError(
            f"{path}: not a text CSV file (byte {exc.start} is not UTF-8); give a .csv/.tsv "
            "text file, or the right extension for a binary format"
        ) from None
    except pd.errors.EmptyDataError:
        raise InputError(f"{path}: no columns to read; the file is empty or not a CSV") from None


def guess_orient(path: Path, sep: str, options: ReadOptions) -> str:
    """``samples`` or ``features``: where ``options.label`` is (a column or a row), else the
    shape."""
    import pandas as pd

    label = options.label
    head = pd.read_csv(path, sep=sep, nrows=200, index_col=0)
    if label is not None:
        if label in head.columns:
            return "samples"
        if label in head.index:
            return "features"
        # the label row may lie beyond the first 200 rows of a features-as-rows file
        ids = pd.read_csv(path, sep=sep, usecols=[0]).iloc[:, 0].astype(str)
        if label in set(ids):
            return "features"
        raise InputError(
            f"{path}: --label {label!r} names neither a column (columns start "
            f"{[str(c) for c in head.columns[:6]]}) nor a row (rows start {list(ids[:4])}); "
            "check the spelling"
        )
    return "samples" if head.shape[1] >= head.shape[0] else "features"


def sniff_sep(path: Path, sep: str | None) -> str:
    """``sep`` if given, else a tab for .tsv/.tab files and a comma otherwise."""
    if sep:
        return sep
    return "\t" if path.suffix.lower() in (".tsv", ".tab") or ".tsv" in path.name.lower() else ","


def samples_as_rows(path: Path, options: ReadOptions, sep: str) -> dict:
    """A row per sample: optional first column of sample ids, a label column (``options.label``),
    numeric features."""
    import pandas as pd

    label = options.label
    df = pd.read_csv(path, sep=sep)
    if df.shape[0] == 0:
        raise InputError(f"{path}: no data rows; the file is empty apart from its header")
    y = None
    if label is not None:
        if label not in df.columns:
            raise InputError(
                f"{path}: no column {label!r} for the labels (columns start {list(df.columns[:8])}); "
                "for a file with a row per feature use --orient features"
            )
        y = df.pop(label).to_numpy()
    sample_names = None
    first = df.columns[0] if df.shape[1] else None
    if (
        first is not None
        and df.shape[1] > 1
        and not np.issubdtype(df[first].dtype, np.number)
        and not df[first].is_unique
        and pd.to_numeric(df[first], errors="coerce").isna().all()
    ):
        dup = df[first][df[first].duplicated()].iloc[0]
        raise InputError(
            f"{path}: duplicate sample id {dup!r} in the first column ({int(df[first].duplicated().sum())} "
            "repeat(s)); every sample needs its own id"
        )
    if (
        first is not None
        and (not np.issubdtype(df[first].dtype, np.number) or str(first).startswith("Unnamed"))
        and df[first].is_unique
        and df.shape[1] > 1
    ):
        sample_names = df.pop(first).to_numpy()
    nonnum = [c for c in df.columns if not np.issubdtype(df[c].dtype, np.number)]
    if nonnum:
        col = nonnum[0]
        bad = df[col][pd.to_numeric(df[col], errors="coerce").isna() & df[col].notna()]
        example = f"; e.g. row {bad.index[0] + 2}: {bad.iloc[0]!r}" if len(bad) else ""
        raise InputError(
            f"{path}: {len(nonnum)} non-numeric column(s) (first: {[str(c) for c in nonnum[:5]]}"
            f"{example}); name the label column with --label, or drop/encode them"
        )
    if df.shape[1] == 0:
        raise InputError(f"{path}: no feature columns")
    return {
        "X": df.to_numpy(dtype=np.float64),
        "y": y,
        "feature_names": np.asarray(df.columns).astype(str),
        "sample_names": sample_names,
        "class_names": None,
    }


def append_columns(group: zarr.Group, start: int, xb: np.ndarray, names: np.ndarray) -> None:
    """Write ``xb`` (samples × w) and its feature ids at feature offset ``start``.

    ``xarray.Dataset.to_zarr(append_dim=…)`` would re-read the whole growing feature
    coordinate on every append (O(p²) time, O(p) memory); resizing the two arrays does not.
    """
    stop = start + xb.shape[1]
    X, F = group["X"], group["feature"]
    X.resize((xb.shape[0], stop))
    X[:, start:stop] = xb
    F.resize((stop,))
    F[start:stop] = names


class FeatureRows:
    """Stream a features-as-rows CSV (first column: feature id; header: sample ids) into a store.

    The file is read ``batch`` rows at a time; rows are buffered until they fill one Zarr
    chunk (all samples × ``block`` features), which is then appended to the store, so
    memory holds one chunk buffer plus one batch whatever the number of rows.  The optional
    label row (``options.label``) may appear anywhere.
    """

    def __init__(
        self,
        path: Path,
        sep: str,
        options: ReadOptions,
        *,
        batch: int,
        chunk_bytes: int,
        dtype: Any,
        kwargs: Mapping[str, Any],
    ):
        import pandas as pd

        header = pd.read_csv(path, sep=sep, nrows=0, index_col=0)
        self.sample_names = np.asarray(header.columns).astype(str)
        self.n = n = self.sample_names.size
        if n == 0:
            raise InputError(
                f"{path}: no sample columns in the header; a features-as-rows file has a header "
                "'feature_id,sample1,sample2,…' and a row per feature"
            )
        self.path, self.sep, self.options, self.batch = path, sep, options, batch
        self.dtype = np.dtype(dtype)
        self.block = feature_block_size(n, self.dtype.itemsize, chunk_bytes)
        self.kwargs = dict(kwargs)
        self.buf = np.empty((n, self.block), dtype=self.dtype)  # one Zarr chunk
        self.buf_names = np.empty(self.block, dtype=object)
        self.filled = self.written = 0
        self.y: np.ndarray | None = None
        self.group: zarr.Group | None = None
        self.digests: list[np.ndarray] = []
        self.report = {"nonfinite_values": 0, "nan_policy": options.nan_policy}
        self.report["dropped_features"] = 0

    def write_chunk(self, target: str, xb: np.ndarray, nb: np.ndarray) -> None:
        """Append one chunk of features (the first one lays the store out)."""
        if self.group is None:  # xarray lays out the store (dimension names, coordinates)
            ds = xr.Dataset(
                {"X": (("sample", "feature"), xb)},
                coords={"feature": nb, "sample": self.sample_names.astype(object)},
                attrs={FORMAT_ATTR: FORMAT_VERSION},
            )  # recognisable as fsdask's while written
            ds.to_zarr(
                target,
                mode="w",
                zarr_format=3,
                consolidated=False,
                encoding=checksum_encoding(ds.variables, {"X": {"chunks": (self.n, self.block)}}),
                **self.kwargs,
            )
            self.group = zarr.open_group(target, mode="r+", zarr_format=3, **self.kwargs)
        else:  # then grow X and the feature ids in place: nothing already written is read back
            append_columns(self.group, self.written, xb, nb)
        digest = hashlib.blake2b(np.ascontiguousarray(xb).tobytes(), digest_size=16).digest()
        self.digests.append(np.frombuffer(digest, dtype=np.uint8))
        self.written += xb.shape[1]

    def add(self, target: str, xb: np.ndarray, fn: np.ndarray) -> None:
        """Copy a batch (samples × rows) into the chunk buffer, writing each chunk as it fills."""
        s = 0
        while s < xb.shape[1]:
            f = self.filled
            take = min(self.block - f, xb.shape[1] - s)
            self.buf[:, f : f + take] = xb[:, s : s + take]
            self.buf_names[f : f + take] = fn[s : s + take]
            self.filled = f + take
            s += take
            if self.filled == self.block:
                self.write_chunk(target, self.buf, self.buf_names)
                self.filled = 0

    def numeric(self, chunk: Any) -> Any:
        """``chunk`` with every sample column numeric, or an InputError naming the bad value."""
        import pandas as pd

        nonnum = [c for c in chunk.columns if not np.issubdtype(chunk[c].dtype, np.number)]
        if nonnum:  # a text label row read in the same batch makes columns text: convert back
            conv = chunk[nonnum].apply(pd.to_numeric, errors="coerce")
            still = [c for c in nonnum if (conv[c].isna() & chunk[c].notna()).any()]
            if not still:
                chunk = (
                    chunk.assign(**{str(c): conv[c] for c in nonnum})
                    if all(isinstance(c, str) for c in nonnum)
                    else chunk.astype({c: float for c in nonnum})
                )
            nonnum = still
        if nonnum:
            col = chunk[nonnum[0]]
            bad = col[pd.to_numeric(col, errors="coerce").isna() & col.notna()]
            where = (
                f"feature {bad.index[0]!r}: {bad.iloc[0]!r}"
                if len(bad)
                else f"near feature {chunk.index[0]!r}"
            )
            hint = (
                " (is it the label row? name it with --label)" if self.options.label is None else ""
            )
            raise InputError(
                f"{self.path}: non-numeric value in sample column {str(nonnum[0])!r} at {where}"
                f"{hint}; a features-as-rows CSV must be numeric apart from the label row"
            )
        return chunk

    def values(self, chunk: Any) -> tuple[np.ndarray, np.ndarray]:
        """(samples × rows block, feature ids) of a numeric batch, NaN policy applied."""
        xb = chunk.to_numpy(dtype=self.dtype).T
        fn = np.asarray(chunk.index).astype(str)
        if not np.isfinite(xb).all():
            xd, fn, rep = apply_nan_policy(
                da.from_array(xb, chunks=xb.shape),
                self.options.nan_policy,
                fn,
                where=f"{self.path} (rows near feature {chunk.index[0]!r})",
            )
            self.report["nonfinite_values"] += rep["nonfinite_values"]
            self.report["dropped_features"] += rep.get("dropped_features", 0)
            xb = np.asarray(xd.compute())
        return xb, fn

    def read(self, target: str) -> None:
        """Read the whole file into the store at ``target``, batch by batch."""
        import pandas as pd

        label_row = self.options.label
        try:
            for chunk in pd.read_csv(self.path, sep=self.sep, index_col=0, chunksize=self.batch):
                if label_row is not None and label_row in chunk.index:
                    self.y = chunk.loc[label_row].to_numpy()
                    chunk = chunk.drop(index=label_row)
                if chunk.shape[0] == 0:
                    continue
                self.add(target, *self.values(self.numeric(chunk)))
            if self.filled:
                self.write_chunk(target, self.buf[:, : self.filled], self.buf_names[: self.filled])
        except pd.errors.ParserError as exc:
            raise InputError(
                f"{self.path}: malformed CSV ({str(exc).splitlines()[0]}); check the separator "
                "(--sep) and that every row has as many fields as the header"
            ) from None
        if self.written == 0:
            raise InputError(
                f"{self.path}: no feature rows; the file is empty apart from its header"
            )

    def labels(self, target: str) -> dict:
        """Write the label row's values as ``y`` (refusing missing ones); its attributes."""
        if self.y is None:
            return {}
        if is_missing(self.y).any():
            miss = np.flatnonzero(is_missing(self.y))
            what = (
                "--drop-unlabelled is not available for a features-as-rows file (it is streamed); "
                if self.options.drop_unlabelled
                else ""
            )
            raise InputError(
                f"{self.path}: {miss.size} sample(s) have no label in row {self.options.label!r} "
                f"(first: {', '.join(self.sample_names[miss[:5]])}); {what}fill them in or "
                "remove those columns"
            )
        y = integral_labels(self.y)
        yds = build_dataset(da.zeros((self.n, 1), chunks=(self.n, 1)), y)
        xr.Dataset({"y": ("sample", yds["y"].values)}).to_zarr(
            target,
            mode="a",
            zarr_format=3,
            consolidated=False,
            encoding=checksum_encoding(["y"]),
            **self.kwargs,
        )
        return dict(yds.attrs)

    def finish(self, target: str, attrs: Mapping[str, Any]) -> str:
        """Write the provenance and, last, the completion marker; return the fingerprint."""
        extra = self.labels(target)
        digests = np.stack(self.digests)
        fingerprint = combine_digests(digests, (self.n, self.written), self.dtype)
        X_meta = da.zeros((self.n, self.written), dtype=self.dtype, chunks=(self.n, self.block))
        final = provenance(str(self.path), X_meta, {**attrs, **extra, **self.report})
        final.update(
            {
                "fingerprint": fingerprint,
                "chunk_features": int(self.block),
                "block_digests": digests.tobytes().hex(),
            }
        )
        mark_complete(target, self.kwargs, final)
        return fingerprint


def stream_features_as_rows(
    path: Path,
    url: str,
    *,
    sep: str,
    options: ReadOptions,
    batch: int,
    storage_options: Mapping[str, Any] | None,
    overwrite: bool,
    chunk_bytes: int,
    attrs: dict,
    dtype: Any = np.float32,
) -> str:
    """Stream a features-as-rows CSV into a new fsdask dataset at ``url``; return its fingerprint.

    Memory: one chunk buffer (all samples × a feature block) plus one batch of rows.
    """
    kwargs = Location.of(url, storage_options).zarr_kwargs()
    rows = FeatureRows(
        path, sep, options, batch=batch, chunk_bytes=chunk_bytes, dtype=dtype, kwargs=kwargs
    )
    with atomic_store(url, storage_options, overwrite=overwrite, inputs=(str(path),)) as target:
        rows.read(target)
        return rows.finish(target, attrs)
