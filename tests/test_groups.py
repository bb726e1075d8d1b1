"""Issue 40 item 2: one-vs-rest tests for every group of a multi-class label in one pass
(``Filter(statistic=..., groups="all")``), compared with scanpy's ``rank_genes_groups``."""

from __future__ import annotations

import warnings

import dask.array as da
import numpy as np
import pytest
import scipy.sparse as sp
import scipy.stats as ss

import fsdask
from fsdask.errors import InputError, ParameterError


def _groups_data(rng, n=150, p=40):
    y = np.array(["a", "b", "c", "d"])[np.arange(n) % 4]
    X = rng.poisson(1.5, (n, p)).astype(np.float64)
    X[rng.random((n, p)) > 0.4] = 0
    for g, label in enumerate("abcd"):  # planted markers: features 2g, 2g + 1 up in group g
        X[np.ix_(y == label, [2 * g, 2 * g + 1])] += 3.0
    X[:, 30] = 0.0  # constant
    return X, y


def _welch(X, y, label):
    m = y == label
    return ss.ttest_ind(X[m], X[~m], equal_var=False)


@pytest.mark.parametrize(
    "layout", ["numpy", "csr", "dask-dense-samples", "dask-csr-samples", "dask-features"]
)
def test_ttest_groups_equal_scipy_welch_one_vs_rest(layout, rng):
    X, y = _groups_data(rng)
    Xl = {
        "numpy": X,
        "csr": sp.csr_matrix(X),
        "dask-dense-samples": da.from_array(X, chunks=(40, 16)),
        "dask-csr-samples": da.from_array(sp.csr_matrix(X), chunks=(40, -1), asarray=False),
        "dask-features": da.from_array(X, chunks=(-1, 9)),
    }[layout]
    f = fsdask.Filter("ttest", groups="all", n_features_to_select=2).fit(Xl, y)
    assert list(f.groups_) == ["a", "b", "c", "d"] and f.n_passes_ == 1
    res = f.result_
    assert res["group_score"].dims == ("group", "feature")
    keep = np.arange(X.shape[1]) != 30
    for g, label in enumerate("abcd"):
        ref = _welch(X[:, keep], y, label)
        got = res["group_score"].sel(group=label).values
        np.testing.assert_allclose(got[keep], ref.statistic, rtol=1e-10)
        np.testing.assert_allclose(
            res["group_pvalue"].sel(group=label).values[keep], ref.pvalue, rtol=1e-8
        )
        adj = ss.false_discovery_control(ref.pvalue)
        np.testing.assert_allclose(
            res["group_pvalue_adj"].sel(group=label).values[keep], adj, rtol=1e-10
        )
        assert got[30] == 0 and np.isnan(res["group_pvalue"].sel(group=label).values[30])
        # each group's top 2 are its planted markers; the selection is their union
        top = f.group_table(label, n=2)
        assert sorted(top["feature"]) == [2 * g, 2 * g + 1]
    assert set(np.flatnonzero(f.support_)) == set(range(8))
    assert f.scores_[0] == pytest.approx(res["group_score"].sel(group="a").values[0])


def test_f_and_fold_change_groups(rng):
    X, y = _groups_data(rng)
    keep = np.arange(X.shape[1]) != 30
    f = fsdask.Filter("f", groups=["b", "d"]).fit(X, y)
    assert list(f.groups_) == ["b", "d"]
    for label in ("b", "d"):
        m = y == label
        F, p = ss.f_oneway(X[m][:, keep], X[~m][:, keep])
        np.testing.assert_allclose(
            f.result_["group_score"].sel(group=label).values[keep], F, rtol=1e-10
        )
        np.testing.assert_allclose(
            f.result_["group_pvalue"].sel(group=label).values[keep], p, rtol=1e-8
        )
    fc = fsdask.Filter("fold_change", groups="all", log_scale=False).fit(X, y)
    m = y == "c"
    want = np.log2((X[m].mean(0) + 1e-9) / (X[~m].mean(0) + 1e-9))
    np.testing.assert_allclose(
        fc.result_["group_score"].sel(group="c").values[keep], want[keep], rtol=1e-10
    )
    assert "group_pvalue" not in fc.result_
    table = fc.group_table()
    assert list(table.columns) == [
        "group",
        "feature",
        "score",
        "rank",
        "selected",
        "group_mean",
        "rest_mean",
    ]
    assert len(table) == 4 * X.shape[1]


def test_groups_bad_input(rng):
    X, y = _groups_data(rng)
    with pytest.raises(ParameterError, match="groups= tests each group .* not 'snr'"):
        fsdask.Filter("snr", groups="all").fit(X, y)
    with pytest.raises(InputError, match=r"groups=\['a', 'z'\]: 'z' not among the labels of y"):
        fsdask.Filter("ttest", groups=["a", "z"]).fit(X, y)
    y1 = y.astype(object)
    y1[0] = "solo"
    with pytest.raises(InputError, match="group 'solo' has 1 of 150 samples"):
        fsdask.Filter("ttest", groups="all").fit(X, y1)
    with pytest.raises(ParameterError, match="needs a Filter fitted with groups="):
        fsdask.Filter("ttest").fit(X, np.arange(150) % 2).group_table()


def test_cli_select_groups_writes_group_results(rng, tmp_path):
    anndata = pytest.importorskip("anndata")
    import pandas as pd

    from fsdask.cli import main

    X, y = _groups_data(rng)
    a = anndata.AnnData(
        sp.csr_matrix(X.astype(np.float32)),
        obs=pd.DataFrame({"cell_type": pd.Categorical(y)}, index=[f"c{i}" for i in range(len(y))]),
        var=pd.DataFrame(index=[f"g{j}" for j in range(X.shape[1])]),
    )
    a.write_h5ad(tmp_path / "in.h5ad")
    argv = ["select", str(tmp_path / "in.h5ad"), "--label", "obs:cell_type", "--method", "ttest"]
    argv += ["--groups", "all", "--param", "n_features_to_select=2", "-o", str(tmp_path / "r.zarr")]
    assert main(argv + ["--no-progress"]) == 0
    res = fsdask.open_result(tmp_path / "r.zarr")
    assert list(res["group"].values) == ["a", "b", "c", "d"]
    assert int(res["selected"].sum()) == 8 and res["group_score"].shape == (4, X.shape[1])


# --------------------------------------------------------------------------- scanpy
def _scanpy_t(adata, groupby, **kw):
    sc = pytest.importorskip("scanpy")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        sc.tl.rank_genes_groups(adata, groupby, method="t-test", n_genes=adata.n_vars, **kw)
    return adata.uns["rank_genes_groups"]


def _by_name(f, names, group, column):
    t = f.group_table(group)
    return dict(zip(names[t["feature"].to_numpy()], t[column].to_numpy()))


def _compare(f, r, names, column, key):
    """Relative differences of one column over every group and gene."""
    rel = []
    for g in f.groups_:
        mine = _by_name(f, names, g, column)
        theirs = np.asarray(r[key][g], dtype=np.float64)
        ours = np.array([mine[n] for n in r["names"][g]])
        rel.append(np.abs(ours - theirs) / np.abs(theirs))
    return np.concatenate(rel)


def test_ttest_groups_equal_scanpy_rank_genes_groups_pbmc68k_reduced():
    """scanpy's bundled pbmc68k_reduced (read from the installed package, no network), its
    default t-test call (use_raw: the log-normalised CSR matrix, float32) on 10 cell types.

    scanpy squares float32 values in float32 (``sparse_mean_var_minor_axis``) and takes the
    variance as E[x²] − E[x]², so its own scores carry up to ~1.3e-6 relative rounding here;
    fsdask's equal the exact float64 Welch t.  On the same matrix in float64 scanpy's
    arithmetic is exact and the two agree to scanpy's float32 storage of the scores.
    """
    sc = pytest.importorskip("scanpy")
    import anndata

    a = sc.datasets.pbmc68k_reduced()
    y = a.obs["bulk_labels"].astype(str).to_numpy()
    names = np.asarray(a.raw.var_names)
    r = _scanpy_t(a, "bulk_labels")
    f = fsdask.Filter("ttest", groups="all").fit(a.raw.X, y)  # CSR, sample-blocked
    rel = _compare(f, r, names, "score", "scores")
    assert np.quantile(rel, 0.999) <= 1e-6 and rel.max() <= 2e-6
    # fsdask is the exact Welch t: checked on the group scanpy rounds most
    Xd = a.raw.X.toarray().astype(np.float64)
    for g in ("CD34+", "Dendritic"):
        got = f.result_["group_score"].sel(group=g).values
        np.testing.assert_allclose(got, _welch(Xd, y, g).statistic, rtol=1e-10)
    # float64 data: scores, p-values and BH-adjusted p-values equal
    b = anndata.AnnData(a.raw.X.astype(np.float64), obs=a.obs[["bulk_labels"]], var=a.raw.var)
    r = _scanpy_t(b, "bulk_labels", use_raw=False)
    f = fsdask.Filter("ttest", groups="all").fit(b.X, y)
    assert _compare(f, r, names, "score", "scores").max() <= 1e-6
    assert _compare(f, r, names, "pvalue", "pvals").max() <= 1e-9
    assert _compare(f, r, names, "pvalue_adj", "pvals_adj").max() <= 1e-9
    for g in f.groups_:  # the same order within each group
        assert list(f.group_table(g, n=20)["feature"].map(lambda j: names[j])) == list(
            r["names"][g][:20]
        )
