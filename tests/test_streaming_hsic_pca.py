"""Issue 40 item 1: SparseHSIC and the PCA baselines on sample-blocked X.

SparseHSIC's A = X H Δᵀ with its screen, and the PCA baselines' centred p × p Gram, are sums
over row blocks (``Execution.sum_blocks``).  A sample-blocked X — dense or CSR blocks, in
memory, on threads, on a 2-process cluster, read from S3 — gives the fit of the
feature-blocked path (rtol 1e-10 in float64, the same selection), and CSR blocks are never
densified.
"""

from __future__ import annotations

import dask
import dask.array as da
import numpy as np
import pytest
import scipy.sparse as sp
from dask.callbacks import Callback

from fsdask import SparseHSIC
from fsdask._validation import is_sample_blocked
from fsdask.fitting import FitContext
from fsdask.linalg.execution import Execution
from fsdask.linalg.gram import shifted_gram_block
from fsdask.linalg.tsqr import centred_gram
from fsdask.methods.pca_based import PFA, JolliffeI, JolliffeNI

N, P = 180, 24
ROWS = 47  # rows per sample block: 47, 47, 47, 39


def _dense(rng):
    """Features on different scales and means (shifted sums must not lose digits), three
    of them depending on a 3-class label."""
    y = rng.integers(0, 3, N)
    X = rng.normal(0, 1, (N, P)) * rng.uniform(0.5, 4, P) + rng.uniform(-50, 50, P)
    X[:, :3] += 2.0 * y[:, None]
    return X, y


def _counts(rng):
    """Sparse integer counts (about 25 % non-zero), three features planted by the label, one
    column without stored values and one without implicit zeros."""
    y = rng.integers(0, 3, N)
    X = rng.poisson(2.0, (N, P)).astype(np.float64)
    X[rng.random((N, P)) > 0.25] = 0
    X[:, :3] += rng.poisson(3.0 * y[:, None], (N, 3))
    X[:, 10] = 0
    X[:, 11] = 5.0
    return X, y


def _sample_blocked(X, kind):
    if kind == "dask-dense":  # several row and column chunks
        return da.from_array(X, chunks=(ROWS, 10))
    if kind == "dask-csr":
        return da.from_array(sp.csr_matrix(X), chunks=(ROWS, -1), asarray=False)
    raise ValueError(kind)


def _feature_blocked(X):
    return da.from_array(X, chunks=(-1, 7))


def _fit(est, X, y=None):
    """The method's own work on X as it comes (the FitOutput) and the passes it made."""
    ctx = FitContext(est, memory_budget=getattr(est, "memory_budget", None)).bind(X, y)
    return est._fit(X, y, ctx), ctx.passes


def _assert_same_fit(a, b):
    np.testing.assert_allclose(a.scores, b.scores, rtol=1e-10, atol=1e-13)
    np.testing.assert_array_equal(a.support, b.support)
    if a.rank_key is not None:
        np.testing.assert_allclose(a.rank_key, b.rank_key, rtol=1e-10, atol=1e-13)
    if a.active is not None:
        np.testing.assert_array_equal(a.active, b.active)


def _y_for(response, y, rng):
    if response == "categorical":
        return y
    if response == "continuous":
        return y + rng.normal(0, 0.5, N)
    return np.column_stack([y + rng.normal(0, 0.5, N), rng.normal(0, 1, N)])  # multivariate


# --------------------------------------------------------------------------- the Gram kernel
@pytest.mark.parametrize("layout", ["numpy", "csr", "dask-dense", "dask-csr", "dask-csr-cols"])
def test_centred_gram_over_row_blocks_equals_numpy(layout, rng):
    X, _ = _counts(rng)
    X[:, 4] += 1e4  # a large mean: the shifted sums keep the digits centring first keeps
    csr = sp.csr_matrix(X.astype(np.int32) if layout == "csr" else X)  # integer counts too
    Xl = {
        "numpy": X,
        "csr": csr,
        "dask-dense": _sample_blocked(X, "dask-dense"),
        "dask-csr": _sample_blocked(X, "dask-csr"),
        "dask-csr-cols": da.from_array(csr, chunks=(ROWS, 9), asarray=False),
    }[layout]
    ex = Execution()
    G = centred_gram(Xl, ex)
    Xc = X - X.mean(0)
    np.testing.assert_allclose(G, Xc.T @ Xc, rtol=1e-11, atol=1e-9)
    assert ex.passes == (0 if layout in ("numpy", "csr") else 1)


def test_shifted_gram_block_dense_and_csr_agree_with_duplicates(rng):
    X, _ = _counts(rng)
    csr = sp.csr_matrix(X)
    # the same matrix with one stored value split in two duplicate entries
    k = csr.indptr[1]
    dup = sp.csr_matrix(
        (
            np.concatenate([csr.data[:k], [csr.data[k] - 1, 1], csr.data[k + 1 :]]),
            np.concatenate([csr.indices[:k], [csr.indices[k]] * 2, csr.indices[k + 1 :]]),
            np.concatenate([csr.indptr[:2], csr.indptr[2:] + 1]),
        ),
        shape=csr.shape,
    )
    assert not dup.has_canonical_format
    K = X[3]
    want = shifted_gram_block(X, K)
    np.testing.assert_allclose(shifted_gram_block(dup, K), want, rtol=1e-12, atol=1e-9)
    np.testing.assert_allclose(want[-1], (X - K).sum(0), rtol=1e-12, atol=1e-9)
    # without a shift, the block's first row is the reference
    np.testing.assert_allclose(shifted_gram_block(csr), shifted_gram_block(X, X[0]), atol=1e-9)


def test_rows_blocked():
    X = np.zeros((10, 4))
    assert not is_sample_blocked(X)
    assert not is_sample_blocked(da.from_array(X, chunks=(-1, 2)))
    assert is_sample_blocked(da.from_array(X, chunks=(5, -1)))
    assert is_sample_blocked(da.from_array(sp.csr_matrix(X), chunks=(-1, -1), asarray=False))


# --------------------------------------------------------------------------- SparseHSIC
@pytest.mark.parametrize("response", ["categorical", "continuous", "multivariate"])
@pytest.mark.parametrize("data", ["dask-dense", "dask-csr"])
def test_hsic_sample_blocked_equals_feature_blocked(response, data, rng):
    X, y = (_dense if data == "dask-dense" else _counts)(rng)
    X[:, 7] = 3.25  # a constant feature, found by the pass's minimum and maximum
    yy = _y_for(response, y, rng)
    make = lambda: SparseHSIC(response=response, n_features_to_select=5)  # noqa: E731
    ref, ref_passes = _fit(make(), _feature_blocked(X), yy)
    est = make()
    got, passes = _fit(est, _sample_blocked(X, data), yy)
    _assert_same_fit(got, ref)
    assert not got.active[7] and got.active.sum() == P - (
        3 if data == "dask-csr" else 1
    )  # counts: 10, 11 too
    assert passes == ref_passes == 1
    assert got.support.sum() == 5 and got.support[:3].all()  # the planted features


@pytest.mark.parametrize("standardize", [True, False])
def test_hsic_A_from_sums_equals_the_feature_pass(standardize, rng):
    X, y = _counts(rng)
    a = SparseHSIC(standardize=standardize, n_features_to_select=3)
    b = SparseHSIC(standardize=standardize, n_features_to_select=3)
    _fit(a, _feature_blocked(X), y)
    _fit(b, _sample_blocked(X, "dask-csr"), y)
    np.testing.assert_allclose(b.hsic_A_, a.hsic_A_, rtol=1e-10, atol=1e-14)


def test_hsic_in_memory_csr_and_counts(rng):
    """An in-memory scipy.sparse X of integer counts, swept in row slices."""
    X, y = _counts(rng)
    ref, _ = _fit(SparseHSIC(n_features_to_select=4), _feature_blocked(X), y)
    got, passes = _fit(SparseHSIC(n_features_to_select=4), sp.csr_matrix(X.astype(np.int64)), y)
    _assert_same_fit(got, ref)
    assert passes == 0  # nothing read from storage


# --------------------------------------------------------------------------- PCA baselines
PCA = {
    "jolliffe_i": lambda scale: JolliffeI(n_features_to_select=6, scale=scale),
    "jolliffe_ni": lambda scale: JolliffeNI(n_features_to_select=6, scale=scale),
    "pfa": lambda scale: PFA(n_features_to_select=6, scale=scale, n_init=3),
}


@pytest.mark.parametrize("scale", [False, True])
@pytest.mark.parametrize("method", list(PCA))
@pytest.mark.parametrize("data", ["dask-dense", "dask-csr"])
def test_pca_sample_blocked_equals_feature_blocked(method, data, scale, rng):
    X, _ = (_dense if data == "dask-dense" else _counts)(rng)
    X = X[:, X.std(0) > 0]  # the baselines get the active features
    ref, ref_passes = _fit(PCA[method](scale), _feature_blocked(X))
    got, passes = _fit(PCA[method](scale), _sample_blocked(X, data))
    _assert_same_fit(got, ref)
    assert got.attrs == ref.attrs
    assert passes == ref_passes == 1


def test_pca_sample_blocked_with_more_features_than_samples(rng):
    """The n × n side of a wide X needs feature blocks: converted, same fit."""
    X = rng.normal(size=(30, 50))
    ref, _ = _fit(JolliffeNI(n_features_to_select=5), _feature_blocked(X))
    got, _ = _fit(JolliffeNI(n_features_to_select=5), da.from_array(X, chunks=(8, 50)))
    _assert_same_fit(got, ref)


# --------------------------------------------------------------------------- through fit
PUBLIC = {
    "hsic": lambda: SparseHSIC(n_features_to_select=4),
    "jolliffe_i": lambda: JolliffeI(n_features_to_select=4),
    "jolliffe_ni": lambda: JolliffeNI(n_features_to_select=4),
    "pfa": lambda: PFA(n_features_to_select=4, n_init=2),
}


@pytest.mark.parametrize("source", ["dask-csr", "scipy-csr", "dask-dense"])
@pytest.mark.parametrize("method", list(PUBLIC))
def test_fit_keeps_sample_blocks_and_equals_the_feature_fit(
    method, source, rng, monkeypatch, tmp_path
):
    """``fit`` hands these methods X as it comes — CSR blocks kept, no conversion to feature
    blocks (tiny dense row blocks are merged whole in the graph) — with the screen: the same
    scores and selection as from a NumPy X, and no scratch copy written."""
    import tempfile

    from fsdask import base

    X, y = _counts(rng)  # constant features 10 and 11: the screen drops them
    ref = PUBLIC[method]().fit(X, y)
    Xs = sp.csr_matrix(X) if source == "scipy-csr" else _sample_blocked(X, source)
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))  # where a scratch copy would go
    converted, seen = [], []
    monkeypatch.setattr(base, "to_feature_blocks", lambda X, **kw: converted.append(X) or X)
    est = PUBLIC[method]()
    fit_ = type(est)._fit
    monkeypatch.setattr(type(est), "_fit", lambda self, X, *a: seen.append(X) or fit_(self, X, *a))
    est.fit(Xs, y)
    assert converted == []
    assert sp.issparse(seen[0]._meta) == (source != "dask-dense")  # CSR blocks reach _fit
    np.testing.assert_allclose(est.scores_, ref.scores_, rtol=1e-10, atol=1e-13)
    np.testing.assert_array_equal(est.support_, ref.support_)
    np.testing.assert_array_equal(est.active_features_, ref.active_features_)
    assert not any(tmp_path.iterdir())


# --------------------------------------------------------------------------- no dense block
class _Outputs(Callback):
    """The shape and kind of every task result of the computations run inside it."""

    def __init__(self):
        super().__init__()
        self.seen: list[tuple[str, tuple]] = []

    def _posttask(self, key, result, dsk, state, worker_id):
        if hasattr(result, "shape"):
            self.seen.append(
                ("csr" if sp.issparse(result) else type(result).__name__, result.shape)
            )


@pytest.mark.parametrize(
    "make",
    [lambda: SparseHSIC(n_features_to_select=4), lambda: JolliffeI(n_features_to_select=4)],
    ids=["hsic", "jolliffe_i"],
)
def test_csr_blocks_are_never_densified(make, rng, monkeypatch):
    """No task of the graph outputs a dense copy of a block of X, and no kernel makes one."""
    from scipy.sparse._compressed import _cs_matrix

    X, y = _counts(rng)
    X = X[:, X.std(0) > 0]
    Xs = _sample_blocked(X, "dask-csr")
    p = X.shape[1]
    dense_blocks = {(N, p)} | {(r, p) for r in Xs.chunks[0]}  # what densifying X would make
    densified = []
    toarray = _cs_matrix.toarray

    def spy(self, *args, **kwargs):
        densified.append(self.shape)
        return toarray(self, *args, **kwargs)

    monkeypatch.setattr(_cs_matrix, "toarray", spy)
    with dask.config.set(scheduler="threads"), _Outputs() as outputs:
        _fit(make(), Xs, y)
    assert ("csr", (ROWS, p)) in outputs.seen  # the blocks were read as CSR …
    dense = [s for kind, s in outputs.seen if kind == "ndarray" and s in dense_blocks]
    assert dense == []  # … no task made a dense copy of one …
    assert densified and all(s[0] == 1 or s == (p, p) for s in densified)  # … nor a kernel
    # (what is densified: the first row, the shift, and JolliffeI's p × p Gram X_bᵀX_b)


# --------------------------------------------------------------------------- cluster, S3
@pytest.mark.cluster
def test_sample_blocked_fits_on_a_two_process_cluster(cluster, rng):
    X, y = _counts(rng)
    X = X[:, X.std(0) > 0]
    Xs = _sample_blocked(X, "dask-csr")
    ref_h, _ = _fit(SparseHSIC(n_features_to_select=4), _feature_blocked(X), y)
    ref_p, _ = _fit(JolliffeNI(n_features_to_select=4), _feature_blocked(X))
    with dask.config.set(scheduler=cluster):
        got_h, _ = _fit(SparseHSIC(n_features_to_select=4), Xs, y)
        got_p, _ = _fit(JolliffeNI(n_features_to_select=4), Xs)
    _assert_same_fit(got_h, ref_h)
    _assert_same_fit(got_p, ref_p)


@pytest.mark.s3
def test_sample_chunked_store_on_s3(s3, rng):
    """A dense Zarr store chunked by samples, on (moto) S3, swept by its stored chunks."""
    import zarr

    bucket, opts = s3
    X, y = _dense(rng)
    url = f"{bucket}/x.zarr"
    z = zarr.open_array(
        url, mode="w-", shape=X.shape, chunks=(ROWS, P), dtype="f8", storage_options=opts
    )
    z[:] = X
    Xs = da.from_zarr(url, storage_options=opts)
    assert len(Xs.chunks[0]) == 4 and len(Xs.chunks[1]) == 1
    got, _ = _fit(SparseHSIC(n_features_to_select=4), Xs, y)
    ref, _ = _fit(SparseHSIC(n_features_to_select=4), _feature_blocked(X), y)
    _assert_same_fit(got, ref)
    got, _ = _fit(PFA(n_features_to_select=5, n_init=2), Xs)
    ref, _ = _fit(PFA(n_features_to_select=5, n_init=2), _feature_blocked(X))
    _assert_same_fit(got, ref)


def test_hsic_A_above_the_budget_takes_feature_blocks(rng):
    """A (p × c) above the budget stays a persisted dask array, which needs X by feature
    blocks: a sample-blocked X is re-blocked (here on the fly), same fit."""
    X, _ = _dense(rng)
    y = np.repeat(np.arange(45), 4)  # 45 classes: A is 24 × 45 × 8 = 8640 bytes
    X[:, :3] += 0.5 * (y % 3)[:, None]
    make = lambda: SparseHSIC(n_features_to_select=2, memory_budget=8000)  # noqa: E731
    ref, _ = _fit(make(), _feature_blocked(X), y)
    # narrow stored chunks: one re-blocked feature block (all samples) fits the 8000 bytes
    got, _ = _fit(make(), da.from_array(X, chunks=(ROWS, 2)), y)
    assert got.attrs["A_in_memory"] is ref.attrs["A_in_memory"] is False
    _assert_same_fit(got, ref)


@pytest.mark.parametrize("data", ["dask-dense", "dask-csr"])
def test_hsic_refuses_nonfinite_values_of_sample_blocks(data, rng):
    from fsdask.errors import InputError

    X, y = _counts(rng)
    X[60, 2] = np.nan  # in the second row block
    X[150, 4] = np.inf
    with pytest.raises(InputError, match=r"X contains 2 NaN/Inf value\(s\) in 2 feature"):
        _fit(SparseHSIC(n_features_to_select=3), _sample_blocked(X, data), y)


def test_pca_gram_above_the_budget_takes_feature_blocks(rng):
    """A p × p Gram whose tree-sum does not fit the budget: X re-blocked by features (on the
    fly here), the Gram taken tile by tile, the same fit."""
    from fsdask.linalg.tsqr import gram_over_samples

    X, _ = _dense(rng)
    Xs = _sample_blocked(X, "dask-dense")
    ref, _ = _fit(JolliffeI(n_features_to_select=5), _feature_blocked(X))
    with dask.config.set({"fsdask.memory-budget": 30_000}):  # 8 × 25 × 24 × 8 B = 38 400 B
        assert not gram_over_samples(Xs, Execution())
        got, _ = _fit(JolliffeI(n_features_to_select=5), Xs)
    assert gram_over_samples(Xs, Execution())
    _assert_same_fit(got, ref)


def test_whole_rows_keeps_the_block_size():
    from fsdask.linalg.gram import whole_rows

    X = da.zeros((1000, 400), chunks=(100, 50))
    W = whole_rows(X)
    assert len(W.chunks[1]) == 1 and max(W.chunks[0]) == 12  # 100 × 50 values ≥ 12 × 400
    C = da.from_array(sp.csr_matrix((1000, 400)), chunks=(100, 50), asarray=False)
    assert whole_rows(C).chunks == ((100,) * 10, (400,))
