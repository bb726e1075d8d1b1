"""The catalogue of what a new user meets first (issue 38): inputs written by the libraries
that own their formats, each either made right or refused with a one-line message that says
what is wrong and what to do — never a silent wrong answer, never a raw NumPy/anndata error.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import xarray as xr

import fsdask
from fsdask.errors import FsdaskError

#: the catalogue of this file: BAD = bad input or environment, refused in one line (exit 2);
#: GOOD = valid input now handled right (the catalogue_* files hold the rest of issue 38's)
CASES = [
    ("dataarray-dims-not-named", "BAD"),
    ("dataarray-cell-gene", "BAD"),
    ("anndata-backed", "BAD"),
    ("dataarray-dims-by-name", "GOOD"),
    ("anndata-in-memory-var-names", "GOOD"),
    ("convergence-warning-sklearn-filter", "GOOD"),
    ("result-describes-itself", "GOOD"),
    ("cluster-yaml-not-a-mapping", "BAD"),
    ("cluster-yaml-invalid", "BAD"),
    ("debug-traceback-url-credentials", "BAD"),
    ("in-memory-dataset-dims-unnamed-open_dataset", "BAD"),
    ("in-memory-dataset-dims-unnamed-ingest", "BAD"),
    ("in-memory-dataset-dims-named", "GOOD"),
    ("export-tests-columns-and-whole-replacement", "GOOD"),
    ("dataset-store-opens-without-warning", "GOOD"),
    ("optional-dependency-missing", "BAD"),
    ("optional-dependency-broken-abi", "BAD"),
    ("optional-dependency-broken-dependency", "BAD"),
]

RNG = np.random.default_rng(0)
X = RNG.normal(size=(20, 8))
X[:10, 2] += 3.0  # feature 2 separates the classes
Y = np.r_[np.zeros(10), np.ones(10)]
GENES = [f"g{j}" for j in range(8)]


def _anndata(backed_path=None):
    anndata = pytest.importorskip("anndata")
    ad = anndata.AnnData(X.copy())
    ad.var_names = GENES
    ad.obs_names = [f"c{i}" for i in range(20)]
    if backed_path is None:
        return ad
    ad.write_h5ad(backed_path)
    return anndata.read_h5ad(backed_path, backed="r")


# ---- refused: (case id, how to make the input, a fragment of the one-line message)
BAD = [
    (
        "dataarray-dims-not-named",
        lambda tmp: xr.DataArray(X.T, dims=("gene", "cell")),
        "matches dims by name",
    ),
    (
        "dataarray-cell-gene",
        lambda tmp: xr.DataArray(X, dims=("cell", "gene"), coords={"gene": GENES}),
        "rename them to 'sample' and 'feature'",
    ),
    ("anndata-backed", lambda tmp: _anndata(tmp / "a.h5ad"), "backed AnnData"),
]


@pytest.mark.parametrize("case, make, message", BAD, ids=[c[0] for c in BAD])
def test_bad_input_is_refused_in_one_line(tmp_path, case, make, message):
    with pytest.raises(FsdaskError) as info:
        fsdask.Filter(statistic="ttest").fit(make(tmp_path), Y)
    text = str(info.value)
    assert message in text and "\n" not in text


# ---- made right: the input means what it says
def test_dims_are_matched_by_name_not_position():
    ref = fsdask.Filter(statistic="ttest").fit(X, Y)
    fe = xr.DataArray(X.T, dims=("feature", "sample"), coords={"feature": GENES})
    est = fsdask.Filter(statistic="ttest").fit(fe, Y)
    np.testing.assert_array_equal(est.scores_, ref.scores_)
    assert list(est.feature_names_in_) == GENES


def test_in_memory_anndata_keeps_its_gene_names():
    est = fsdask.Filter(statistic="ttest", n_features_to_select=1).fit(_anndata(), Y)
    assert list(est.feature_names_in_) == GENES
    assert list(est.get_feature_names_out()) == ["g2"]
    np.testing.assert_array_equal(est.scores_, fsdask.Filter(statistic="ttest").fit(X, Y).scores_)


def test_convergence_warning_obeys_scikit_learns_filter():
    from sklearn.exceptions import ConvergenceWarning

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        warnings.simplefilter("ignore", ConvergenceWarning)
        fsdask.Logo(max_iter=1).fit(X, Y)  # stops at max_iter: warns, silenced by the filter
    with pytest.warns(ConvergenceWarning):
        fsdask.Logo(max_iter=1).fit(X, Y)


def test_result_describes_itself():
    res = fsdask.Filter(statistic="ttest").fit(X, Y).result_
    for var in ("weight", "rank", "selected"):
        assert res[var].attrs["description"]
    assert "1 is the most relevant" in res["rank"].attrs["description"]
    np.datetime64(res.attrs["created"].replace("+00:00", ""))  # an ISO time


# ---- the CLI: exit 2 and one line on stderr, nothing written
@pytest.fixture
def store(tmp_path):
    fsdask.ingest(X.astype(np.float32), tmp_path / "d.zarr", y=Y)
    return tmp_path / "d.zarr"


CLI_BAD = [
    ("cluster-yaml-not-a-mapping", "cluster.yaml", "- just\n- a list\n", "expected a mapping"),
    ("cluster-yaml-invalid", "cluster.yaml", "jobqueue: [slurm\n", "not valid YAML"),
]


@pytest.mark.parametrize("case, name, text, message", CLI_BAD, ids=[c[0] for c in CLI_BAD])
def test_cli_bad_input_exits_2_in_one_line(capsys, store, tmp_path, case, name, text, message):
    from fsdask.cli import main

    (tmp_path / name).write_text(text)
    out = tmp_path / "r.zarr"
    argv = ["select", store, "--method", "ttest", "-o", out, "--scheduler", tmp_path / name]
    code = main([str(a) for a in argv])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and message in err, err
    assert not out.exists()


def test_debug_traceback_never_shows_url_credentials(capsys):
    from fsdask.cli import main

    url = "s3://AKIAEXAMPLE:wJalrSECRETKEY@bucket/x.zarr"
    code = main(["--debug", "info", url])
    err = capsys.readouterr().err
    assert code == 2 and "Traceback" in err  # --debug shows the traceback, and still exits 2
    assert "SECRETKEY" not in err and "AKIAEXAMPLE" not in err


# ---- in-memory xarray objects through open_dataset and ingest: dims by name
def _gene_cell():
    return xr.Dataset(
        {"expr": (("gene", "cell"), X.T), "cell_type": ("cell", ["a"] * 10 + ["b"] * 10)},
        coords={"gene": GENES},
    )


@pytest.mark.parametrize("door", ["open_dataset", "ingest"])
def test_in_memory_dataset_dims_unnamed_are_refused(tmp_path, door):
    call = (
        (lambda ds, **kw: fsdask.open_dataset(ds, **kw))
        if door == "open_dataset"
        else (lambda ds, **kw: fsdask.ingest(ds, tmp_path / "o.zarr", **kw))
    )
    with pytest.raises(FsdaskError, match="never guesses by position") as info:
        call(_gene_cell())
    assert "\n" not in str(info.value) and "('gene', 'cell')" in str(info.value)
    assert not (tmp_path / "o.zarr").exists()


def test_in_memory_dataset_dims_named_by_the_caller(tmp_path):
    ds = fsdask.open_dataset(_gene_cell(), sample_dim="cell")
    assert ds["X"].dims == ("sample", "feature") and ds.sizes["feature"] == 8
    assert list(ds["feature"].values) == GENES and ds.attrs["class_names"] == ["a", "b"]
    np.testing.assert_array_equal(ds["X"].values, X)
    fsdask.ingest(_gene_cell(), tmp_path / "o.zarr", sample_dim="cell")
    back = fsdask.open_dataset(tmp_path / "o.zarr")
    np.testing.assert_allclose(back["X"].values, X, rtol=1e-6)  # ingest stores float32
    np.testing.assert_array_equal(back["y"].values, ds["y"].values)


def test_export_carries_the_tests_columns_and_replaces_an_export_whole(tmp_path):
    anndata = pytest.importorskip("anndata")
    from fsdask.io.anndata_write import annotate_anndata

    ad = _anndata()
    ad.write_h5ad(tmp_path / "in.h5ad")
    ttest = fsdask.Filter(statistic="ttest").fit(ad, Y).result_
    out = annotate_anndata(ttest, tmp_path / "in.h5ad", tmp_path / "out.h5ad", key_added="tt")
    var = anndata.read_h5ad(out).var
    for col in (
        "tt_selected",
        "tt_weight",
        "tt_rank",
        "tt_pvalue",
        "tt_pvalue_adj",
        "tt_direction",
    ):
        assert col in var, col
    np.testing.assert_allclose(var["tt_pvalue"].to_numpy(), ttest["pvalue"].values)
    # a second export under the same key replaces all of the first one's columns
    variance = fsdask.Filter(statistic="variance").fit(ad).result_
    ad2 = anndata.read_h5ad(out)
    with pytest.raises(FsdaskError, match="--overwrite"):
        annotate_anndata(variance, ad2, key_added="tt")
    annotate_anndata(variance, ad2, key_added="tt", overwrite=True)
    assert "tt_pvalue" not in ad2.var and "tt_weight" in ad2.var


def test_a_dataset_store_opens_in_xarray_without_a_warning(tmp_path):
    fsdask.ingest(X, tmp_path / "d.zarr", y=Y)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        xr.open_zarr(tmp_path / "d.zarr")  # consolidated metadata written last, by fsdask


# ---- optional dependencies: missing and broken are told apart, with the real cause
@pytest.mark.parametrize(
    "body, says",
    [
        (None, "which is not installed: pip install 'fsdask[h5ad]'"),
        ("raise ValueError('numpy.dtype size changed')", "installed but does not import"),
        ("import zarr_v2_only_module", "No module named 'zarr_v2_only_module'"),
    ],
    ids=["missing", "broken-abi", "broken-dependency"],
)
def test_optional_dependency_errors_say_why(tmp_path, monkeypatch, body, says):
    import sys

    from fsdask.errors import MissingDependencyError, import_optional

    name = "fsdask_probe_dependency"
    if body is not None:
        (tmp_path / f"{name}.py").write_text(body + "\n")
        monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, name, raising=False)
    with pytest.raises(MissingDependencyError) as info:
        import_optional(name, "h5ad", "reading AnnData")
    assert says in str(info.value) and "\n" not in str(info.value)
