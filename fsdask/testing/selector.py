"""One test suite for every fsdask selector (the model: zarr-python's ``StoreTests``).

A method's test module subclasses :class:`SelectorChecks` and says how to build a small,
fast estimator and the data it is fitted on::

    class TestLogo(SelectorChecks):
        def make_estimator(self, **params):
            return Logo(sigma=2.0, **params)

Every subclass then gets: numpy / dask / xarray / Zarr-store inputs give the same result;
the result does not depend on the chunking; threads and a real 2-process LocalCluster give
identical results (the ``cluster`` fixture); pickling; the ``result_`` schema; the shared
bad-input catalogue, including NaN / ±Inf / non-integral / non-boolean values of every
declared parameter.
"""

from __future__ import annotations

import pickle
from numbers import Integral, Real
from typing import Any

import dask
import dask.array as da
import numpy as np
import pytest
import xarray as xr

from fsdask.errors import InputError, ParameterError


class SelectorChecks:
    """Shared tests; subclasses override :meth:`make_estimator` (and the data when needed)."""

    #: data shape of :meth:`make_data`
    n_samples: int = 30
    n_features: int = 12
    #: feature-block sizes compared by the chunking test
    chunkings: tuple[int, ...] = (5, 12)
    #: tolerance of "the same result" across input kinds and chunkings (sums in another order)
    rtol: float = 1e-7
    #: ``n_features_to_select`` used by the catalogue's "more than p" case
    too_many_key: str = "n_features_to_select"
    #: threads and cluster give bit-identical scores; False for methods whose dense products
    #: (p × p or r × r Gram, eigh) run in the driver's threaded BLAS on one side and in a
    #: worker's single-threaded BLAS on the other (then: the same selection, scores to 1e-12)
    cluster_exact: bool = True

    # ---- what a subclass provides ----
    def make_estimator(self, **params: Any):  # pragma: no cover - abstract
        raise NotImplementedError

    def make_data(self) -> tuple[np.ndarray, np.ndarray]:
        """Two classes; the first three features carry the class, the rest is noise."""
        rng = np.random.default_rng(0)
        X = rng.normal(size=(self.n_samples, self.n_features))
        y = np.arange(self.n_samples) % 2
        X[:, :3] += 2.5 * y[:, None] * np.array([1.0, -1.0, 0.8])
        return X, y

    # ---- helpers ----
    def _fit(self, X: Any, y: np.ndarray | None = None, **params: Any):
        est = self.make_estimator(**params)
        return est.fit(X, y if est.requires_y else None)

    def _assert_same(self, a, b, exact: bool = False) -> None:
        if exact:
            np.testing.assert_array_equal(a.scores_, b.scores_)
        else:
            np.testing.assert_allclose(
                a.scores_, b.scores_, rtol=self.rtol, atol=1e-12 * np.abs(a.scores_).max()
            )
        np.testing.assert_array_equal(a.support_, b.support_)

    # ---- inputs ----
    def test_numpy_dask_xarray_zarr_agree(self, tmp_path):
        import fsdask

        X, y = self.make_data()
        ref = self._fit(X, y)
        self._assert_same(ref, self._fit(da.from_array(X, chunks=(-1, 5)), y))
        names = [f"g{j}" for j in range(X.shape[1])]
        xa = xr.DataArray(X, dims=("sample", "feature"), coords={"feature": names})
        fitted = self._fit(xa, y)
        self._assert_same(ref, fitted)
        assert list(fitted.result_["feature"].values) == names
        assert list(fitted.get_feature_names_out()) == [
            n for n, s in zip(names, fitted.support_) if s
        ]
        fsdask.ingest(X, tmp_path / "x.zarr", y=y, dtype=np.float64, chunk_bytes=X.shape[0] * 8 * 4)
        ds = fsdask.open_dataset(tmp_path / "x.zarr")
        from_store = self.make_estimator().fit(ds)
        self._assert_same(ref, from_store)
        assert from_store.result_.attrs["input_fingerprint"] == ds.attrs["fingerprint"]

    def test_chunking_independent(self):
        X, y = self.make_data()
        fits = [self._fit(da.from_array(X, chunks=(-1, c)), y) for c in self.chunkings]
        for other in fits[1:]:
            self._assert_same(fits[0], other)

    @pytest.mark.cluster
    def test_threads_and_cluster_identical(self, cluster):
        X, y = self.make_data()
        Xd = da.from_array(X, chunks=(-1, 5))
        threads = self._fit(Xd, y)
        with dask.config.set(scheduler=cluster):
            dist = self._fit(Xd, y)
        if self.cluster_exact:
            self._assert_same(threads, dist, exact=True)
        else:
            np.testing.assert_allclose(dist.scores_, threads.scores_, rtol=1e-12, atol=1e-14)
            np.testing.assert_array_equal(dist.support_, threads.support_)

    def test_pickle_roundtrip(self):
        X, y = self.make_data()
        est = self._fit(X, y)
        back = pickle.loads(pickle.dumps(est))
        np.testing.assert_array_equal(back.transform(X), est.transform(X))
        xr.testing.assert_identical(back.result_, est.result_)

    def test_result_schema(self):
        X, y = self.make_data()
        est = self._fit(X, y)
        p = X.shape[1]
        res = est.result_
        for name in ("weight", "rank", "selected"):
            assert res[name].dims == ("feature",) and res.sizes["feature"] == p
        np.testing.assert_array_equal(res["weight"].values, est.scores_)
        np.testing.assert_array_equal(res["selected"].values, est.support_)
        assert sorted(res["rank"].values) == list(range(1, p + 1))
        for key in (
            "method",
            "estimator",
            "parameters",
            "n_selected",
            "n_features",
            "fsdask_version",
        ):
            assert key in res.attrs, key
        assert res.attrs["n_selected"] == int(est.support_.sum()) and res.attrs["n_features"] == p
        assert est.transform(X).shape == (X.shape[0], int(est.support_.sum()))
        assert est.inverse_transform(est.transform(X)).shape == X.shape

    # ---- the bad-input catalogue ----
    @pytest.mark.parametrize(
        "case",
        [
            "nan",
            "inf",
            "all_constant",
            "one_d",
            "empty_samples",
            "empty_features",
            "label_length",
            "one_class",
            "too_many",
        ],
    )
    def test_bad_input(self, case):
        X, y = self.make_data()
        est = self.make_estimator()
        yy = y if est.requires_y else None
        if case in ("nan", "inf"):
            X = X.copy()
            X[2, 4] = np.nan if case == "nan" else -np.inf
            with pytest.raises(InputError, match=r"1 NaN/Inf value\(s\) in 1 feature"):
                est.fit(X, yy)
        elif case == "all_constant":
            with pytest.raises(InputError, match="constant"):
                est.fit(np.ones_like(X), yy)
        elif case == "one_d":
            with pytest.raises(InputError, match="2-D"):
                est.fit(X[:, 0], yy)
        elif case == "empty_samples":
            with pytest.raises(InputError, match="empty"):
                est.fit(X[:0], None if yy is None else yy[:0])
        elif case == "empty_features":
            with pytest.raises(InputError, match="empty"):
                est.fit(X[:, :0], yy)
        elif case == "label_length":
            if yy is None:
                pytest.skip("unsupervised: y is not used")
            with pytest.raises(
                InputError, match=f"{len(y) - 1} entries but X has {len(y)} samples"
            ):
                est.fit(X, y[:-1])
        elif case == "one_class":
            if yy is None or est.y_task == "regression":
                pytest.skip("no classes: y is not used or continuous")
            with pytest.raises(InputError, match="single class"):
                est.fit(X, np.zeros_like(y))
        elif case == "too_many":
            if self.too_many_key not in est.get_params():
                pytest.skip("no n_features_to_select")
            est.set_params(**{self.too_many_key: X.shape[1] + 1})
            with pytest.raises(ParameterError, match=f"{X.shape[1] + 1}"):
                est.fit(X, yy)

    def test_constant_feature_gets_weight_zero(self):
        X, y = self.make_data()
        X = X.copy()
        X[:, 5] = 3.0
        est = self._fit(X, y)
        assert est.scores_[5] == 0 and not est.support_[5] and est.ranking_[5] == X.shape[1]
        assert est.result_.attrs["n_constant_features"] == 1
        if "on_constant" in est.get_params():
            with pytest.raises(InputError, match="constant feature"):
                self._fit(X, y, on_constant="error")

    def test_bad_parameter_values_are_refused_by_name(self):
        """Every float parameter refuses NaN and ±Inf, integers 2.5 and True, booleans "yes"."""
        X, y = self.make_data()
        est = self.make_estimator()
        tried = 0
        for name, constraints in est._parameter_constraints.items():
            kinds = {getattr(c, "type", None) for c in constraints}
            bad: list[Any] = []
            if Real in kinds:
                bad += [np.nan, np.inf, -np.inf]
            elif Integral in kinds:
                bad += [2.5, True]
            if "boolean" in constraints:
                bad += ["yes"]
            for value in bad:
                tried += 1
                with pytest.raises(ParameterError, match=f"'{name}' parameter"):
                    self.make_estimator(**{name: value}).fit(X, y if est.requires_y else None)
        assert tried, "no declared parameter was tried"
