"""``--nan-policy`` on every command that reads data other tools wrote (select, evaluate, info,
report), applied as the data are read: by feature blocks and by sample blocks alike."""

import numpy as np
import pytest
import xarray as xr
import zarr

import fsdask
from fsdask.cli import main
from fsdask.errors import InputError

N, P = 40, 12


def _foreign(tmp_path, chunks, all_nan=True):
    """An xarray-written store with NaN/Inf in feature 2 (two values) and, with ``all_nan``,
    every value of feature 5."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(N, P)).astype(np.float32)
    X[3, 2], X[7, 2] = np.nan, np.inf
    if all_nan:
        X[:, 5] = np.nan
    y = np.repeat([0, 1], N // 2)
    ds = xr.Dataset(
        {"X": (("cell", "gene"), X), "y": (("cell",), y)},
        coords={"cell": [f"c{i}" for i in range(N)], "gene": [f"g{j}" for j in range(P)]},
    )
    url = str(tmp_path / "foreign.zarr")
    ds.to_zarr(url, encoding={"X": {"chunks": chunks}}, mode="w")
    return url, X


@pytest.mark.parametrize("chunks", [(N, 4), (10, P)], ids=["feature-blocks", "sample-blocks"])
def test_policies_as_the_in_memory_arithmetic(tmp_path, chunks):
    url, X = _foreign(tmp_path, chunks)
    opts = {"sample_dim": "cell", "feature_dim": "gene"}
    drop = fsdask.open_dataset(url, nan_policy="drop-feature", **opts)
    assert list(drop["feature"].values) == [f"g{j}" for j in range(P) if j not in (2, 5)]
    np.testing.assert_array_equal(drop["X"].values, np.delete(X, [2, 5], axis=1))
    assert drop.attrs["dropped_features"] == 2
    zero = fsdask.open_dataset(url, nan_policy="zero", **opts)
    np.testing.assert_array_equal(zero["X"].values, np.where(np.isfinite(X), X, 0))
    with pytest.raises(InputError, match="no finite value at all.*g5.*drop-feature"):
        fsdask.open_dataset(url, nan_policy="mean", **opts)


@pytest.mark.parametrize("chunks", [(N, 4), (10, P)], ids=["feature-blocks", "sample-blocks"])
def test_mean_uses_every_block(tmp_path, chunks):
    url, X = _foreign(tmp_path, chunks, all_nan=False)
    got = fsdask.open_dataset(url, nan_policy="mean", sample_dim="cell", feature_dim="gene")
    finite = np.isfinite(X[:, 2])
    expect = X.copy()
    expect[~finite, 2] = X[finite, 2].astype(np.float64).mean()
    np.testing.assert_allclose(got["X"].values, expect, rtol=1e-6)
    assert got.attrs["nonfinite_values"] == 2


def test_select_cli_refuses_then_reads_with_a_policy(tmp_path, capsys):
    url, _ = _foreign(tmp_path, (10, P))
    out = tmp_path / "sel.zarr"
    args = [
        "select",
        url,
        "-o",
        str(out),
        "--method",
        "variance",
        "--param",
        "n_features_to_select=3",
    ]
    args += ["--sample-dim", "cell", "--feature-dim", "gene"]
    assert main(args) == 2
    err = capsys.readouterr().err
    assert "NaN/Inf" in err and "--nan-policy" in err and not out.exists()
    assert main([*args, "--nan-policy", "drop-feature"]) == 0
    res = fsdask.open_result(out)
    assert "g5" not in set(map(str, res["feature"].values))
    assert zarr.open_group(url, mode="r")["X"].shape == (N, P)  # the source is not rewritten
