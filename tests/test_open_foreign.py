"""Opening Zarr stores other tools wrote (xarray, zarr-python v2/v3), locally and on the S3 server.

Each store is written by the library that owns the format; every check compares with the
same matrix as numpy (values, labels, ids, and a Filter's weights).
"""

import logging

import numpy as np
import pytest
import xarray as xr
import zarr

import fsdask
from fsdask.cli import main
from fsdask.errors import InputError, StoreError

N, P = 24, 40


@pytest.fixture
def data(rng):
    X = rng.normal(size=(N, P))
    y = np.repeat(["ctrl", "case"], N // 2)
    X[y == "case", :3] += 2.0  # three informative features, so the ranking is not arbitrary
    return X, y


def _ref_weights(X, y):
    codes = np.unique(y, return_inverse=True)[1]
    return fsdask.Filter("ttest").fit(X, codes).result_["weight"].values


def _where(kind, tmp_path, s3, name):
    if kind == "local":
        return str(tmp_path / name), None, {}
    bucket, opts = s3
    return f"{bucket}/{name}", opts, {"storage_options": opts}


def _xarray(X, y, url, so, fmt, consolidated, dtype=np.float64):
    """(gene, cell) orientation, as a single-cell user would save it."""
    ds = xr.Dataset(
        {"expr": (("gene", "cell"), X.T.astype(dtype)), "condition": ("cell", y)},
        coords={"gene": [f"g{j}" for j in range(P)], "cell": [f"c{i}" for i in range(N)]},
    )
    ds.chunk({"gene": 16}).to_zarr(
        url, zarr_format=fmt, consolidated=consolidated, storage_options=so
    )


def _zarr_python(X, y, url, so, fmt):
    """Plain zarr-python arrays: v3 with dimension_names; v2 without any dim names."""
    g = zarr.open_group(url, mode="w", zarr_format=fmt, storage_options=so)
    if fmt == 3:
        g.create_array("data", data=X, chunks=(N, 8), dimension_names=("sample", "feature"))
        g.create_array("y", data=(y == "case").astype(np.int64), dimension_names=("sample",))
    else:
        g.create_array("data", data=X, chunks=(N, 8))
        g.create_array("y", data=(y == "case").astype(np.int64))


@pytest.mark.parametrize("kind", ["local", "s3"])
@pytest.mark.parametrize("writer", ["xarray-v3", "xarray-v2-consolidated", "zarr-v3", "zarr-v2"])
def test_foreign_stores_equal_numpy(kind, writer, tmp_path, request, data):
    X, y = data
    s3 = request.getfixturevalue("s3") if kind == "s3" else None
    url, so, kw = _where(kind, tmp_path, s3, f"{writer}.zarr")
    if writer.startswith("xarray"):
        _xarray(X, y, url, so, 3 if writer == "xarray-v3" else 2, writer.endswith("consolidated"))
        ds = fsdask.open_dataset(url, sample_dim="cell", label="condition", **kw)
        assert list(ds["feature"].values[:2]) == ["g0", "g1"] and ds["sample"].values[5] == "c5"
        assert ds.attrs["class_names"] == ["case", "ctrl"]
        assert "opened read-only" in ds.attrs["foreign"] and "cell → sample" in ds.attrs["foreign"]
    elif writer == "zarr-v3":
        _zarr_python(X, y, url, so, 3)
        ds = fsdask.open_dataset(url, **kw)  # dims named sample/feature; y found by name
    else:
        _zarr_python(X, y, url, so, 2)
        with pytest.raises(InputError, match=r"dims \('dim_0', 'dim_1'\).*--sample-dim"):
            fsdask.open_dataset(url, **kw)
        ds = fsdask.open_dataset(url, sample_dim="dim_0", **kw)
    np.testing.assert_array_equal(ds["X"].values, X)
    assert len(ds["X"].chunks[0]) == 1  # every block holds all samples
    codes = ds["y"].values
    assert np.array_equal(codes == codes[-1], y == y[-1])
    np.testing.assert_allclose(
        fsdask.Filter("ttest").fit(ds).result_["weight"].values, _ref_weights(X, y), rtol=1e-10
    )


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.int32, np.uint8])
def test_dtypes(dtype, tmp_path, data):
    X, y = data
    Xt = (np.abs(X) * 10).astype(dtype)
    _xarray(Xt, y, str(tmp_path / "d.zarr"), None, 3, False, dtype=dtype)
    ds = fsdask.open_dataset(tmp_path / "d.zarr", feature_dim="gene")
    assert ds["X"].dtype == (np.float32 if dtype == np.float16 else dtype)
    np.testing.assert_array_equal(ds["X"].values, Xt.astype(ds["X"].dtype))
    np.testing.assert_allclose(
        fsdask.Filter("ttest")
        .fit(ds, ds["y"].values if "y" in ds else np.unique(y, return_inverse=True)[1])
        .result_["weight"],
        _ref_weights(Xt.astype(np.float64), y),
        rtol=1e-6,
    )


def _make_public(bucket, endpoint):
    """A public-read bucket, as data portals publish them: anyone may list and get."""
    import json

    import boto3

    policy = {
        "Version": "2012-10-17",
        "Statement": [
            {
                "Effect": "Allow",
                "Principal": "*",
                "Action": ["s3:GetObject"],
                "Resource": f"arn:aws:s3:::{bucket}/*",
            },
            {
                "Effect": "Allow",
                "Principal": "*",
                "Action": ["s3:ListBucket"],
                "Resource": f"arn:aws:s3:::{bucket}",
            },
        ],
    }
    c = boto3.client(
        "s3",
        endpoint_url=endpoint,
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
        region_name="us-east-1",
    )
    c.put_bucket_policy(Bucket=bucket, Policy=json.dumps(policy))
    for obj in c.list_objects_v2(Bucket=bucket).get("Contents", []):  # objects uploaded public-read
        c.put_object_acl(Bucket=bucket, Key=obj["Key"], ACL="public-read")


def test_public_bucket_anonymous(s3, data, s3_endpoint):
    X, y = data
    bucket, opts = s3
    _xarray(X, y, f"{bucket}/pub.zarr", opts, 3, True)
    _make_public(bucket.removeprefix("s3://"), s3_endpoint)
    ds = fsdask.open_dataset(
        f"{bucket}/pub.zarr",
        storage_options={"anon": True, "endpoint_url": s3_endpoint},
        sample_dim="cell",
    )
    np.testing.assert_array_equal(ds["X"].values, X)


def test_chunked_by_samples_copy_and_on_the_fly(tmp_path, data, caplog):
    X, y = data
    g = zarr.open_group(str(tmp_path / "rows.zarr"), mode="w", zarr_format=3)
    g.create_array(
        "X", data=X, chunks=(5, P), dimension_names=("sample", "feature")
    )  # all features per chunk
    g.create_array("tiny", data=X, chunks=(5, 4), dimension_names=("sample", "feature"))
    budget = (
        2 * N * 8 * 8 * 4
    )  # an output block of ~8 features; a whole-row chunk is not re-blockable in it
    with caplog.at_level(logging.INFO, logger="fsdask"):
        ds = fsdask.open_dataset(
            tmp_path / "rows.zarr", memory_budget=budget, chunk_bytes=N * 8 * 8, layout="features"
        )
    assert "rechunked copy" in caplog.text and "Cost: one extra pass" in caplog.text
    np.testing.assert_array_equal(ds["X"].values, X)
    assert len(ds["X"].chunks[0]) == 1 and max(ds["X"].chunks[1]) <= 16
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="fsdask"):
        ds = fsdask.open_dataset(
            tmp_path / "rows.zarr",
            variable="tiny",
            memory_budget=budget,
            chunk_bytes=N * 8 * 8,
            layout="features",
        )
    assert "on the fly" in caplog.text and "rechunked copy" not in caplog.text
    np.testing.assert_array_equal(ds["X"].values, X)
    assert ds["X"].chunks[1] == (8, 8, 8, 8, 8)  # whole stored chunks merged, none cut
    dest = tmp_path / "copy.zarr"
    ds = fsdask.open_dataset(
        tmp_path / "rows.zarr",
        memory_budget=budget,
        chunk_bytes=N * 8 * 8,
        rechunk_to=str(dest),
        layout="features",
    )
    np.testing.assert_array_equal(ds["X"].values, X)
    assert (dest / "X").exists() and not (dest / "intermediate").exists()
    with pytest.raises(StoreError, match="already exists"):
        fsdask.open_dataset(
            tmp_path / "rows.zarr",
            memory_budget=budget,
            chunk_bytes=N * 8 * 8,
            rechunk_to=str(dest),
            layout="features",
        )


def test_rechunk_copy_on_s3(s3, data):
    X, _ = data
    bucket, opts = s3
    g = zarr.open_group(f"{bucket}/rows.zarr", mode="w", zarr_format=2, storage_options=opts)
    g.create_array(
        "X", data=X, chunks=(6, P), attributes={"_ARRAY_DIMENSIONS": ["sample", "feature"]}
    )
    ds = fsdask.open_dataset(
        f"{bucket}/rows.zarr",
        storage_options=opts,
        memory_budget=2 * N * 8 * 8 * 4,
        chunk_bytes=N * 8 * 8,
        rechunk_to=f"{bucket}/copy.zarr",
        layout="features",
    )
    np.testing.assert_array_equal(ds["X"].values, X)
    assert len(ds["X"].chunks[0]) == 1


def test_bad_input_one_line_errors(tmp_path, data):
    X, y = data
    u = str(tmp_path / "bad.zarr")
    xr.Dataset(
        {
            "a": (("s", "f"), X),
            "b": (("s", "f"), X),
            "cube": (("s", "f", "k"), X[:, :, None]),
            "txt": (("s", "f"), X.astype(str)),
            "dup": (("sample", "feature"), X),
            "lab_nan": ("s", np.where(np.arange(N) == 3, np.nan, 1.0)),
            "short": ("k", [1.0]),
            "good": ("s", y),
        }
    ).to_zarr(u, zarr_format=3, consolidated=False)
    cases = [
        ({}, InputError, "several 2-D variables"),
        ({"variable": "cube"}, InputError, "3-D"),
        ({"variable": "a"}, InputError, r"dims \('s', 'f'\), none named"),
        ({"variable": "a", "sample_dim": "s", "feature_dim": "s"}, InputError, "both 's'"),
        ({"variable": "a", "sample_dim": "nope"}, InputError, "not a dim"),
        ({"variable": "txt", "sample_dim": "s"}, InputError, "not numbers"),
        (
            {"variable": "a", "sample_dim": "s", "label": "missing"},
            InputError,
            "no label variable 'missing'",
        ),
        (
            {"variable": "a", "sample_dim": "s", "label": "lab_nan"},
            InputError,
            "missing for 1 sample",
        ),
        ({"variable": "a", "sample_dim": "s", "label": "short"}, InputError, "shape"),
        ({"variable": "nothing"}, InputError, "no variable 'nothing'"),
    ]
    for kw, exc, msg in cases:
        with pytest.raises(exc, match=msg) as info:
            fsdask.open_dataset(u, **kw)
        assert "bad.zarr" in str(info.value) and "\n" not in str(info.value)
    ds = fsdask.open_dataset(u, variable="a", sample_dim="s", label="good")
    np.testing.assert_array_equal(ds["X"].values, X)
    xr.Dataset({"v": ("a", np.arange(3))}).to_zarr(tmp_path / "one.zarr", zarr_format=2)
    with pytest.raises(StoreError, match="no 2-D numeric variable"):
        fsdask.open_dataset(tmp_path / "one.zarr")


@pytest.mark.parametrize("missing", [None, "", "  ", np.nan])
def test_missing_labels_refused_or_dropped(tmp_path, data, missing, capsys):
    # a missing label is never a class of its own: refused naming the store, or dropped
    X, y = data
    y = y.astype(object)
    y[[2, 7]] = missing
    u = str(tmp_path / "m.zarr")
    _xarray(X, y, u, None, 3, False)
    with pytest.raises(InputError, match=r"m.zarr: label 'condition' is missing for 2 sample"):
        fsdask.open_dataset(u, sample_dim="cell", label="condition")
    ds = fsdask.open_dataset(u, sample_dim="cell", label="condition", drop_unlabelled=True)
    assert ds.attrs["dropped_unlabelled_samples"] == 2
    keep = np.setdiff1d(np.arange(N), [2, 7])
    got = fsdask.Filter("ttest").fit(ds).result_["weight"].values
    np.testing.assert_allclose(got, _ref_weights(X[keep], y[keep].astype(str)), rtol=1e-6)
    out = str(tmp_path / "r.zarr")
    argv = ["select", u, "--sample-dim", "cell", "--label", "condition", "--method", "ttest"]
    assert main([*argv, "-o", out, "--no-progress"]) == 2
    assert "--drop-unlabelled" in capsys.readouterr().err and not (tmp_path / "r.zarr").exists()
    assert main([*argv, "-o", out, "--no-progress", "--drop-unlabelled"]) == 0
    np.testing.assert_allclose(fsdask.open_result(out)["weight"].values, got, rtol=1e-12)
    capsys.readouterr()
    store = str(tmp_path / "kept.zarr")
    ingest = ["ingest", u, store, "--sample-dim", "cell", "--label", "condition"]
    assert main([*ingest, "--drop-unlabelled"]) == 0
    assert "dropped 2 sample(s) without a label" in capsys.readouterr().out
    assert fsdask.open_dataset(store).sizes["sample"] == N - 2


def test_fsdask_store_without_marker_still_refused_and_bad_chunk(tmp_path, data):
    X, y = data
    fsdask.ingest(X, tmp_path / "d.zarr", y=y)
    g = zarr.open_group(str(tmp_path / "d.zarr"), mode="r+")
    del g.attrs["fsdask_complete"]
    with pytest.raises(StoreError, match="incomplete"):
        fsdask.open_dataset(tmp_path / "d.zarr")
    _zarr_python(X, y, str(tmp_path / "f.zarr"), None, 3)
    (tmp_path / "f.zarr" / "data" / "c" / "0" / "2").write_bytes(b"garbage")
    ds = fsdask.open_dataset(tmp_path / "f.zarr")
    with pytest.raises(StoreError, match=r"cannot read X \(features 16–23\)"):
        ds["X"].values  # noqa: B018 - the read is the test


def test_cli_info_select_ingest_foreign(tmp_path, data, capsys):
    X, y = data
    u = str(tmp_path / "x.zarr")
    _xarray(X, y, u, None, 2, True)
    assert main(["info", u]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "('gene', 'cell')" in err and "--sample-dim" in err
    assert main(["info", u, "--sample-dim", "cell", "--label", "condition"]) == 0
    out = capsys.readouterr().out
    assert "foreign" in out and "read-only" in out and "24 samples × 40 features" in out
    assert (
        main(
            [
                "select",
                u,
                "--feature-dim",
                "gene",
                "--label",
                "condition",
                "--method",
                "ttest",
                "-o",
                str(tmp_path / "r.zarr"),
                "--no-progress",
            ]
        )
        == 0
    )
    np.testing.assert_allclose(
        fsdask.open_result(tmp_path / "r.zarr")["weight"].values, _ref_weights(X, y), rtol=1e-6
    )
    assert (
        main(
            ["ingest", u, str(tmp_path / "c.zarr"), "--sample-dim", "cell", "--label", "condition"]
        )
        == 0
    )
    ds = fsdask.open_dataset(tmp_path / "c.zarr")
    assert "foreign" not in ds.attrs and ds.attrs["class_names"] == ["case", "ctrl"]
    np.testing.assert_allclose(ds["X"].values, X.astype(np.float32))
