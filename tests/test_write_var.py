"""Issue 40, item 4: a selection written into an AnnData-on-Zarr store in place.

Stores are written by anndata itself (Zarr formats 2 and 3, consolidated as anndata writes
them) and read back with anndata and scanpy.  The crash tests fail the write at every step
(in process: an exception; in a child process: SIGKILL, so nothing cleans up) and check
that anndata still reads the store as it was.
"""

from __future__ import annotations

import hashlib
import os
import pathlib
import shutil
import signal
import subprocess
import sys
import textwrap
import warnings

import numpy as np
import pandas as pd
import pytest
import xarray as xr

import fsdask
import fsdask.api
from fsdask.errors import InputError, ParameterError, StoreError
from fsdask.io.writeback import ZarrAnnData, write_var

ad = pytest.importorskip("anndata")
sc = pytest.importorskip("scanpy")
zarr = pytest.importorskip("zarr")

FORMATS = [2, 3]
COLUMNS = [f"fsdask_f_{s}" for s in ("score", "rank", "selected", "pvalue", "pvalue_adj")]


def make_adata(n=60, p=12, seed=0):
    import scipy.sparse as sp

    rng = np.random.default_rng(seed)
    X = sp.random(n, p, density=0.4, format="csr", dtype=np.float32, random_state=seed)
    y = np.repeat(["a", "b", "c"], n // 3)
    X = X + sp.csr_matrix(np.outer(y == "b", np.eye(p)[1]) * 3.0)  # gene g1 marks group b
    obs = pd.DataFrame({"g": pd.Categorical(y)}, index=[f"c{i}" for i in range(n)])
    var = pd.DataFrame(
        {"hv": np.arange(p) % 2 == 0, "sym": [f"S{i}" for i in range(p)]},
        index=[f"g{i}" for i in range(p)],
    )
    a = ad.AnnData(X.tocsr().astype(np.float32), obs=obs, var=var)
    a.uns["foo"] = {"x": 1, "s": "kept"}
    a.layers["counts"] = X.tocsr().astype(np.float32)
    a.obsm["emb"] = rng.normal(size=(n, 2))
    return a


def write_store(path, fmt, adata=None):
    adata = make_adata() if adata is None else adata
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with ad.settings.override(zarr_write_format=fmt):
            adata.write_zarr(path)
    return path


def fitted(store, n=3, statistic="f"):
    ds = fsdask.open_dataset(str(store), label="obs:g")
    return fsdask.Filter(statistic=statistic, n_features_to_select=n).fit(ds)


@pytest.fixture(scope="module")
def fits(tmp_path_factory):
    """Fitted selectors of the data :func:`make_adata` makes (n selected → selector)."""
    store = write_store(tmp_path_factory.mktemp("fits") / "a.zarr", 2)
    return {n: fitted(store, n) for n in (3, 5)}


def read(store, consolidated=True):
    """What anndata sees (read_zarr: consolidated metadata), or the objects themselves."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if consolidated:
            return ad.read_zarr(store)
        return ad.io.read_elem(zarr.open_group(store, mode="r", use_consolidated=False))


def assert_same(a, b):
    """Two AnnData objects hold the same data (X, layers, obs, var, obsm, uns)."""
    assert (a.X != b.X).nnz == 0
    assert (a.layers["counts"] != b.layers["counts"]).nnz == 0
    pd.testing.assert_frame_equal(a.obs, b.obs)
    pd.testing.assert_frame_equal(a.var, b.var)
    np.testing.assert_array_equal(a.obsm["emb"], b.obsm["emb"])
    assert a.uns.keys() == b.uns.keys()
    assert dict(a.uns["foo"]) == dict(b.uns["foo"])


def objects(store) -> dict[str, str]:
    """relative path → sha256 of every file of a local store."""
    root = pathlib.Path(store)
    return {
        str(f.relative_to(root)): hashlib.sha256(f.read_bytes()).hexdigest()
        for f in sorted(root.rglob("*"))
        if f.is_file()
    }


@pytest.mark.parametrize("fmt", FORMATS)
def test_columns_and_provenance_added_nothing_else_touched(tmp_path, fits, fmt):
    store = write_store(tmp_path / "a.zarr", fmt)
    before, old = objects(store), read(store)
    sel = fits[3]
    assert write_var(store, sel) == COLUMNS
    new = read(store)
    # anndata sees the columns, in order after the existing ones, with the result's values
    assert list(new.var.columns) == ["hv", "sym", *COLUMNS]
    res = sel.result_
    by_name = pd.Series(res["weight"].values, index=res["feature"].values.astype(str))
    np.testing.assert_allclose(new.var["fsdask_f_score"], by_name[new.var_names].to_numpy())
    assert new.var["fsdask_f_selected"].dtype == bool
    assert new.var["fsdask_f_selected"].sum() == 3
    assert new.var["fsdask_f_rank"].min() == 1
    np.testing.assert_allclose(new.var["fsdask_f_pvalue"], res["pvalue"].values)
    prov = new.uns["fsdask"]["f"]
    assert prov["method"] == "f" and prov["fsdask_version"] == fsdask.__version__
    assert list(prov["columns"]) == COLUMNS and len(prov["input_fingerprint"]) == 64
    assert '"n_features_to_select": 3' in prov["parameters"] and prov["created"]
    # everything else as it was; the objects themselves agree with the consolidated view
    assert_same(old, _without(new, COLUMNS))
    pd.testing.assert_frame_equal(read(store, consolidated=False).var, new.var)
    after = objects(store)
    changed = {k for k in before if before[k] != after.get(k)}
    allowed = {"var/.zattrs", ".zmetadata", ".zattrs", ".zgroup"} if fmt == 2 else set()
    allowed |= {"var/zarr.json", "zarr.json"} if fmt == 3 else set()
    assert changed <= allowed
    added = set(after) - set(before)
    assert all(k.startswith(("var/fsdask_f_", "uns/fsdask/")) for k in added), added
    # scanpy uses the selection as a gene mask
    sc.pp.pca(new, n_comps=2, mask_var="fsdask_f_selected")
    assert new.varm["PCs"][~new.var["fsdask_f_selected"].to_numpy()].any() == 0


def _without(a, cols, uns=True):
    b = a.copy()
    b.var = b.var.drop(columns=cols)
    if uns:
        del b.uns["fsdask"]
    return b


def test_a_store_without_consolidated_metadata_stays_so(tmp_path, fits):
    store = write_store(tmp_path / "a.zarr", 2)
    (store / ".zmetadata").unlink()
    old = read(store)
    write_var(store, fits[3])
    assert not (store / ".zmetadata").exists()
    new = read(store)  # anndata lists the store itself now
    assert list(new.var.columns) == ["hv", "sym", *COLUMNS]
    assert_same(old, _without(new, COLUMNS))


def test_existing_columns_refused_unless_named(tmp_path, fits):
    store = write_store(tmp_path / "a.zarr", 3)
    write_var(store, fits[3])
    before = objects(store)
    sel5 = fits[5]
    with pytest.raises(StoreError, match="var already has fsdask_f_score") as err:
        write_var(store, sel5)
    assert "\n" not in str(err.value)
    with pytest.raises(StoreError, match="fsdask_f_pvalue"):  # naming some is not enough
        write_var(store, sel5, overwrite=["fsdask_f_score", "fsdask_f_rank", "fsdask_f_selected"])
    with pytest.raises(ParameterError, match="not something this write adds"):
        write_var(store, sel5, overwrite=["hv"])
    assert objects(store) == before  # refusals change nothing
    write_var(store, sel5, overwrite="all")
    new = read(store)
    assert new.var["fsdask_f_selected"].sum() == 5
    assert list(new.var.columns) == ["hv", "sym", *COLUMNS]
    assert '"n_features_to_select": 5' in new.uns["fsdask"]["f"]["parameters"]
    # another method's columns go beside them; uns/fsdask keeps both entries
    write_var(store, fitted(store, statistic="variance"))
    new = read(store)
    assert set(new.uns["fsdask"]) == {"f", "variance"}
    assert "fsdask_variance_score" in new.var and new.var["fsdask_f_selected"].sum() == 5


def _failing_at(monkeypatch, k):
    """Make the k-th change of a write-back (put, remove, consolidate) raise, or, with k a
    key, the first put of that key; return the list of changes made: (method, key)."""
    calls = []

    def wrap(name):
        real = getattr(ZarrAnnData, name)

        def step(self, *args):
            calls.append((name, args[0] if args else ""))
            if len(calls) == k or (name == "put" and args[0] == k):
                raise OSError(f"injected failure at step {len(calls)} ({name})")
            return real(self, *args)

        monkeypatch.setattr(ZarrAnnData, name, step)

    for name in ("put", "remove", "consolidate"):
        wrap(name)
    return calls


def boundaries(steps: list[tuple[str, str]]) -> list[int]:
    """The steps (1-based) where a write-back passes from one phase to the next: every
    remove, metadata rewrite of var and consolidation, the first and last object of the
    column arrays and of the uns entry."""
    ks = {i + 1 for i, (name, key) in enumerate(steps) if name != "put" or key.count("/") == 1}
    for start in ("var/fsdask_", "uns/"):
        idx = [i + 1 for i, (n, key) in enumerate(steps) if n == "put" and key.startswith(start)]
        ks |= {idx[0], idx[-1]}
    return sorted(ks)


@pytest.mark.parametrize(
    "fmt, replace", [(2, False), (3, False), (3, True)], ids=["v2-new", "v3-new", "v3-overwrite"]
)
def test_a_failure_at_any_step_leaves_the_store_as_anndata_read_it(
    tmp_path, monkeypatch, fits, fmt, replace
):
    pristine = write_store(tmp_path / "pristine.zarr", fmt)
    if replace:
        write_var(pristine, fits[3])
    sel = fits[5]
    done = tmp_path / "done.zarr"
    shutil.copytree(pristine, done)
    with monkeypatch.context() as m:
        steps = _failing_at(m, 0)
        write_var(done, sel, overwrite="all")
    final, old = read(done), read(pristine)
    withdrawn = _without(old, COLUMNS, uns=False) if replace else old
    for k in boundaries(steps):
        store = tmp_path / f"k{k}.zarr"
        shutil.copytree(pristine, store)
        with monkeypatch.context() as m:
            _failing_at(m, k)
            with pytest.raises(StoreError, match="failed") as err:
                write_var(store, sel, overwrite="all")
        assert "\n" not in str(err.value)
        seen = read(store)
        if k == len(steps):  # the last step (consolidated metadata) failed
            assert "run the same command again" in str(err.value)
            _assert_var(seen, withdrawn)
            assert_same(read(store, consolidated=False), final)
        elif replace and "without the replaced columns" in str(err.value):
            # valid: as it was, or with the old columns withdrawn; never half-written
            _assert_var(seen, old if "fsdask_f_score" in seen.var else withdrawn)
        else:
            assert_same(seen, old)
            assert_same(read(store, consolidated=False), old)
        write_var(store, sel, overwrite="all")  # a second run finishes the job
        assert_same(read(store), final)


def _assert_var(seen, expected):
    """``seen`` holds ``expected``'s data, whatever its uns/fsdask entry is."""
    pd.testing.assert_frame_equal(seen.var, expected.var)
    assert (seen.X != expected.X).nnz == 0
    assert dict(seen.uns["foo"]) == dict(expected.uns["foo"])


KILLER = textwrap.dedent(
    """
    import os, signal, sys
    from fsdask.io.writeback import ZarrAnnData, write_var
    from fsdask.results import open_result
    k, calls = int(sys.argv[3]), []
    for name in ("put", "remove", "consolidate"):
        def wrap(real, name=name):
            def step(self, *args):
                calls.append(name)
                if len(calls) == k:
                    os.kill(os.getpid(), signal.SIGKILL)
                return real(self, *args)
            return step
        setattr(ZarrAnnData, name, wrap(getattr(ZarrAnnData, name)))
    write_var(sys.argv[1], open_result(sys.argv[2]))
    """
)


def test_a_killed_write_leaves_the_store_as_it_was(tmp_path, fits):
    pristine = write_store(tmp_path / "pristine.zarr", 2)
    sel = fits[3]
    result = fsdask.write_result(sel.result_, str(tmp_path / "res.zarr"))
    old = read(pristine)
    env = {**os.environ, "PYTHONPATH": str(pathlib.Path(fsdask.__file__).parents[1])}
    shutil.copytree(pristine, tmp_path / "count.zarr")
    with pytest.MonkeyPatch.context() as m:
        calls = _failing_at(m, 0)
        write_var(tmp_path / "count.zarr", sel)
    steps = [key for _, key in calls]
    # killed at the uns entry's marker (the columns written, unlisted) and at the switch
    for k in (steps.index("uns/fsdask/.zgroup") + 1, steps.index("var/.zattrs") + 1):
        store = tmp_path / f"k{k}.zarr"
        shutil.copytree(pristine, store)
        proc = subprocess.run(
            [sys.executable, "-c", KILLER, str(store), result, str(k)],
            capture_output=True,
            text=True,
            env=env,
        )
        assert proc.returncode == -signal.SIGKILL, proc.stderr
        assert_same(read(store), old)
        sc.pp.pca(read(store), n_comps=2)  # scanpy works on it as before
        assert write_var(store, sel) == COLUMNS  # leftovers are recognised and replaced
        assert read(store).var["fsdask_f_selected"].sum() == 3


def test_groups_give_one_set_of_columns_per_group(tmp_path):
    # a one-vs-rest result as Filter(groups=...) makes it: the best group's score over
    # feature, and group_score, group_rank, group_selected, group_pvalue over group × feature
    store = write_store(tmp_path / "a.zarr", 3)
    names = [f"g{i}" for i in range(12)]
    w = np.random.default_rng(1).random((3, 12))
    rank = np.argsort(np.argsort(-w, axis=1), axis=1) + 1
    gf = ("group", "feature")
    res = xr.Dataset(
        {
            "weight": ("feature", w.max(axis=0)),
            "rank": ("feature", np.argsort(np.argsort(-w.max(axis=0))) + 1),
            "selected": ("feature", (rank <= 2).any(axis=0)),
            "group_score": (gf, w),
            "group_rank": (gf, rank),
            "group_selected": (gf, rank <= 2),
            "group_pvalue": (gf, w / 2),
            "group_mean": (gf, w),
        },
        coords={"feature": names, "group": ["a", "b/c", "d"]},
        attrs={"method": "ttest", "parameters": "{}"},
    )
    cols = write_var(store, res)
    assert cols[:3] == ["fsdask_ttest_score", "fsdask_ttest_rank", "fsdask_ttest_selected"]
    assert "fsdask_ttest_b_c_score" in cols and len(cols) == 3 + 3 * 4
    new = read(store)
    np.testing.assert_allclose(new.var["fsdask_ttest_d_score"], w[2])
    np.testing.assert_allclose(new.var["fsdask_ttest_a_pvalue"], w[0] / 2)
    assert new.var["fsdask_ttest_a_selected"].sum() == 2
    assert (new.var["fsdask_ttest_d_rank"] == rank[2]).all()
    assert list(new.uns["fsdask"]["ttest"]["groups"]) == ["a", "b_c", "d"]


def test_only_verified_anndata_is_touched(tmp_path, fits):
    sel = fits[3]
    plain = tmp_path / "plain.zarr"
    zarr.open_group(plain, mode="w").create_array("X", shape=(3, 3), dtype="f8")
    ds_store = tmp_path / "ds.zarr"
    X = xr.DataArray(np.ones((4, 12)), dims=("sample", "feature"))
    fsdask.write_dataset(xr.Dataset({"X": X}), str(ds_store))
    for store in (plain, ds_store):
        before = objects(store)
        with pytest.raises(InputError, match="not an AnnData store"):
            write_var(store, sel)
        assert objects(store) == before
    with pytest.raises(InputError, match="not a Zarr store"):
        write_var(tmp_path, sel)
    # a var column fsdask did not write, hidden (unlisted) under a name it wants: left alone
    store = write_store(tmp_path / "b.zarr", 2)
    zarr.open_group(store, mode="r+", use_consolidated=False)["var"].create_array(
        "fsdask_f_rank", shape=(12,), dtype="i8"
    )
    before = objects(store)
    with pytest.raises(StoreError, match="not written by fsdask"):
        write_var(store, sel)
    assert objects(store) == before


def test_result_from_other_data_refused(tmp_path):
    store = write_store(tmp_path / "a.zarr", 3)
    other = write_store(tmp_path / "o.zarr", 3, make_adata(p=14))
    before = objects(store)
    with pytest.raises(InputError, match="not in var_names"):
        write_var(store, fitted(other))
    assert objects(store) == before


def test_h5ad_is_never_modified_in_place(tmp_path, fits):
    a = make_adata()
    h5 = tmp_path / "a.h5ad"
    a.write_h5ad(h5)
    sel = fits[3]
    digest = hashlib.sha256(h5.read_bytes()).hexdigest()
    with pytest.raises(InputError, match="never modified in place"):
        fsdask.api.select(
            str(h5), method="f", output=str(tmp_path / "r.zarr"), write_var=True, stdout=None
        )
    with pytest.raises(InputError, match="never modified in place"):
        write_var(h5, sel)
    with pytest.raises(InputError, match="no such store"):
        write_var(tmp_path / "nothing.zarr", sel)
    out = tmp_path / "copy.h5ad"
    assert write_var(h5, sel, out=out) == COLUMNS
    assert hashlib.sha256(h5.read_bytes()).hexdigest() == digest
    b = ad.read_h5ad(out)
    assert b.var["fsdask_f_selected"].sum() == 3 and b.uns["fsdask"]["f"]["method"] == "f"
    assert not (tmp_path / "r.zarr").exists()


def test_on_s3(tmp_path, s3, fits):
    import s3fs

    bucket, so = s3
    local = write_store(tmp_path / "a.zarr", 3)
    sel = fits[3]
    fs = s3fs.S3FileSystem(**so)
    url = f"{bucket}/atlas.zarr"
    fs.put(str(local), url.removeprefix("s3://"), recursive=True)
    old = read(zarr.open_group(url, mode="r", storage_options=so))
    with pytest.MonkeyPatch.context() as m:  # fails at the column-order switch
        _failing_at(m, "var/zarr.json")
        with pytest.raises(StoreError, match="as it was"):
            write_var(url, sel, storage_options=so)
    assert_same(read(zarr.open_group(url, mode="r", storage_options=so)), old)
    assert write_var(url, sel, storage_options=so) == COLUMNS
    new = read(zarr.open_group(url, mode="r", storage_options=so))
    assert new.var["fsdask_f_selected"].sum() == 3 and "f" in new.uns["fsdask"]
    with pytest.raises(StoreError, match="var already has"):
        write_var(url, sel, storage_options=so)


def fsdask_cli(capsys, *args):
    """Run ``fsdask ARGS`` in this process: (exit status, stdout, stderr)."""
    from fsdask.cli import main

    code = main([str(a) for a in args])
    out = capsys.readouterr()
    return code, out.out, out.err


def test_cli_write_var(tmp_path, capsys):
    store = write_store(tmp_path / "a.zarr", 2)
    base = ["select", store, "--method", "f", "--label", "obs:g", "--no-progress"]
    base += ["--param", "n_features_to_select=4"]
    code, out, err = fsdask_cli(capsys, *base, "--output", tmp_path / "r1.zarr", "--write-var")
    assert code == 0, err
    assert "var columns fsdask_f_score, fsdask_f_rank" in out
    assert read(store).var["fsdask_f_selected"].sum() == 4
    before = objects(store)
    code, out, err = fsdask_cli(capsys, *base, "--output", tmp_path / "r2.zarr", "--write-var")
    assert code == 2 and len(err.strip().splitlines()) == 1
    assert "already has fsdask_f_score" in err
    assert not (tmp_path / "r2.zarr").exists() and objects(store) == before  # before the fit
    code, out, err = fsdask_cli(capsys, *base, "-o", tmp_path / "r2.zarr", "--overwrite-var", "all")
    assert code == 2 and "add --write-var" in err
    code, out, err = fsdask_cli(
        capsys, *base, "-o", tmp_path / "r2.zarr", "--write-var", "--overwrite-var", "all"
    )
    assert code == 0, err
