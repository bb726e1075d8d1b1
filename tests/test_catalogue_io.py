"""Issue 38, outputs and io: what fsdask replaces, how it exports, and damaged or full storage.

Inputs are made by the libraries that own their formats (anndata writes ``.h5ad``, fsdask's
ingest and select write stores, pandas/plain files are real files, the moto S3 server of
``conftest.py`` is real S3).  A full disk is a real tmpfs when this process may mount one
(root), and otherwise the writer is made to fail with ``ENOSPC`` as a full disk makes it.

BAD cases end in ONE line on stderr and exit 2 with nothing already written lost; GOOD cases
are valid runs that must be handled right.
"""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest

import fsdask
from fsdask.cli import main

anndata = pytest.importorskip("anndata")

CASES = [
    ("csv-user-table-with-fsdask-header-select", "BAD"),
    ("csv-user-table-with-fsdask-header-evaluate", "BAD"),
    ("csv-fsdask-table-edited-by-user", "BAD"),
    ("result-store-with-user-file-in-a-variable", "BAD"),
    ("s3-result-with-user-object", "BAD"),
    ("s3-url-with-credentials", "BAD"),
    ("s3-output-url-with-credentials", "BAD"),
    ("export-second-method-same-key", "BAD"),
    ("export-duplicate-var-names", "BAD"),
    ("export-read-only-folder", "BAD"),
    ("export-parent-is-a-file", "BAD"),
    ("export-full-folder", "BAD"),
    ("export-output-appears-during-copy", "BAD"),
    ("export-inside-the-input-store", "BAD"),
    ("h5ad-truncated-info", "BAD"),
    ("h5ad-truncated-select", "BAD"),
    ("h5ad-truncated-export", "BAD"),
    ("h5ad-flipped-bits", "BAD"),
    ("rechunk-copy-full-tmpdir", "BAD"),
    ("csr-copy-full-tmpdir", "BAD"),
    ("disk-full-before-start", "BAD"),
    ("export-onto-a-real-full-disk", "BAD"),
    ("csv-fsdask-table-replaced-with-overwrite", "GOOD"),
    ("s3-result-replaced-with-overwrite", "GOOD"),
    ("export-second-method-key-added", "GOOD"),
    ("export-same-key-overwrite", "GOOD"),
    ("export-anndata-zarr-key-added", "GOOD"),
    ("info-csr-anndata-without-copy", "GOOD"),
    ("zarr-store-default-encoding-only-own-keys", "GOOD"),
    ("zarr-store-v2-encoding-only-own-keys", "GOOD"),
    ("zarr-store-sharded-only-own-keys", "GOOD"),
]

RNG = np.random.default_rng(38)
N, P = 24, 40


def run(capsys, *argv) -> tuple[int, str, str]:
    """``fsdask ARGV`` in this process: (exit status, stdout, stderr)."""
    capsys.readouterr()
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def assert_refused(code: int, err: str, *fragments: str) -> None:
    lines = [ln for ln in err.strip().splitlines() if ln.strip()]
    assert code == 2, err
    assert len(lines) == 1, err
    for f in fragments:
        assert f in lines[0], lines[0]


@pytest.fixture
def data(tmp_path):
    """A labelled fsdask dataset (24 samples × 40 features, features 0–2 separate)."""
    X = RNG.normal(size=(N, P)).astype(np.float32)
    y = np.repeat([0, 1], N // 2)
    X[y == 1, :3] += 2.0
    fsdask.ingest(X, tmp_path / "d.zarr", y=y, feature_names=[f"g{j}" for j in range(P)])
    return tmp_path / "d.zarr"


def select(capsys, data, out, *extra):
    return run(
        capsys, "select", data, "--method", "ttest", "-o", out, "--scheduler", "sync", *extra
    )


# ---- 1. "the same kind": a marker fsdask writes, not a header that looks like one
def test_user_csv_with_fsdask_header_is_not_replaced(tmp_path, data, capsys):
    mine = tmp_path / "mine.csv"
    mine.write_text("rank,feature,weight,selected\n1,my-gene,9.5,1\n")  # the user's own table
    code, _, err = select(capsys, data, tmp_path / "r.zarr", "--csv", mine, "--overwrite")
    assert_refused(code, err, str(mine), "fsdask replaces only its own outputs", "marker")
    assert mine.read_text() == "rank,feature,weight,selected\n1,my-gene,9.5,1\n"


def test_user_csv_with_fsdask_header_is_not_replaced_by_evaluate(tmp_path, data, capsys):
    mine = tmp_path / "curve.csv"
    text = "n_features,error_rate,n_errors\n1,0.5,12\n"
    mine.write_text(text)
    code, _, err = run(
        capsys,
        "evaluate",
        data,
        "--method",
        "ttest",
        "--protocol",
        "kfold",
        "--folds",
        "3",
        "--max-features",
        "2",
        "--csv",
        mine,
        "--overwrite",
        "--scheduler",
        "sync",
    )
    assert_refused(code, err, str(mine))
    assert mine.read_text() == text


def test_fsdask_csv_edited_by_user_is_not_replaced(tmp_path, data, capsys):
    table = tmp_path / "t.csv"
    assert select(capsys, data, tmp_path / "r.zarr", "--csv", table)[0] == 0
    with open(table, "a") as fh:
        fh.write("# my note\n")
    edited = table.read_text()
    code, _, err = select(capsys, data, tmp_path / "r2.zarr", "--csv", table, "--overwrite")
    assert_refused(code, err, str(table))
    assert table.read_text() == edited


def test_fsdask_csv_is_replaced_with_overwrite(tmp_path, data, capsys):
    table = tmp_path / "t.csv"
    assert select(capsys, data, tmp_path / "r.zarr", "--csv", table)[0] == 0
    first = table.read_text()
    assert first.startswith("rank,feature,weight,selected")  # the header users read is unchanged
    assert (tmp_path / ".t.csv.fsdask.json").is_file()  # the marker
    code, _, err = select(capsys, data, tmp_path / "r2.zarr", "--csv", table, "--overwrite")
    assert code == 0, err
    assert table.read_text() == first
    code, _, err = select(capsys, data, tmp_path / "r3.zarr", "--csv", table)
    assert_refused(code, err, "--overwrite")  # still refused without --overwrite


def test_result_store_with_a_user_file_inside_a_variable_is_not_replaced(tmp_path, data, capsys):
    out = tmp_path / "r.zarr"
    assert select(capsys, data, out)[0] == 0
    note = out / "weight" / "notes.txt"
    note.write_text("my notes")
    code, _, err = select(capsys, data, out, "--overwrite")
    assert_refused(code, err, "other files added", "weight/notes.txt")
    assert note.read_text() == "my notes"


@pytest.mark.s3
def test_s3_result_with_a_user_object_is_not_replaced(s3, tmp_path, capsys):
    import s3fs

    url, opts = s3
    X = RNG.normal(size=(N, P)).astype(np.float32)
    fsdask.ingest(X, f"{url}/d.zarr", y=np.repeat([0, 1], N // 2), storage_options=opts)
    so = [f"--storage-option={k}={v}" for k, v in opts.items()]
    out = f"{url}/r.zarr"
    assert select(capsys, f"{url}/d.zarr", out, *so)[0] == 0
    # a GOOD case first: fsdask's own result, untouched, is replaced with --overwrite
    code, _, err = select(capsys, f"{url}/d.zarr", out, *so, "--overwrite")
    assert code == 0, err
    fs = s3fs.S3FileSystem(**opts)
    fs.pipe(f"{out.removeprefix('s3://')}/notes.txt", b"mine")
    fs.invalidate_cache()
    code, _, err = select(capsys, f"{url}/d.zarr", out, *so, "--overwrite")
    assert_refused(code, err, "notes.txt")
    assert fs.cat(f"{out.removeprefix('s3://')}/notes.txt") == b"mine"


# ---- 4. credentials in a URL: never shown, and where they belong
@pytest.mark.parametrize("command", ["info", "select"])
def test_credentials_in_an_s3_url_are_never_shown(tmp_path, data, command):
    secret_url = "s3://AKIAEXAMPLEKEY38:VerySecretValue38@bucket/x.zarr"
    args = (
        ["info", secret_url]
        if command == "info"
        else ["select", str(data), "--method", "ttest", "-o", secret_url]
    )
    p = subprocess.run(
        [sys.executable, "-m", "fsdask.cli", *args], capture_output=True, text=True, timeout=120
    )
    assert p.returncode == 2, p.stderr
    assert len(p.stderr.strip().splitlines()) == 1, p.stderr
    for secret in ("AKIAEXAMPLEKEY38", "VerySecretValue38"):
        assert secret not in p.stderr + p.stdout
    assert "--storage-option" in p.stderr and "s3://bucket/x.zarr" in p.stderr


# ---- 2. export: its own key, no silent replacement, no replacement of the output
@pytest.fixture
def h5ad(tmp_path, capsys):
    """An .h5ad written by anndata (CSC counts, cell types) and two results computed on it."""
    X = RNG.poisson(2.0, size=(N, P)).astype(np.float32)
    X[N // 2 :, :3] += 5
    a = anndata.AnnData(
        X=__import__("scipy.sparse").sparse.csc_matrix(X),
        obs=pd.DataFrame(
            {"cell_type": pd.Categorical(np.repeat(["a", "b"], N // 2))},
            index=[f"c{i}" for i in range(N)],
        ),
        var=pd.DataFrame(
            {"symbol": [f"S{j}" for j in range(P)]}, index=[f"g{j}" for j in range(P)]
        ),
    )
    a.write_h5ad(tmp_path / "in.h5ad")
    for method, out in (("ttest", "r1.zarr"), ("fisher", "r2.zarr")):
        code, _, err = run(
            capsys,
            "select",
            tmp_path / "in.h5ad",
            "--label",
            "obs:cell_type",
            "--method",
            method,
            "--param",
            "n_features_to_select=3",
            "-o",
            tmp_path / out,
            "--scheduler",
            "sync",
        )
        assert code == 0, err
    return tmp_path / "in.h5ad", tmp_path / "r1.zarr", tmp_path / "r2.zarr"


def export(capsys, result, src, out, *extra):
    return run(capsys, "export", result, "--anndata", src, "-o", out, *extra)


def test_export_a_second_method_under_the_same_key_is_refused(tmp_path, h5ad, capsys):
    src, r1, r2 = h5ad
    assert export(capsys, r1, src, tmp_path / "o1.h5ad")[0] == 0
    code, _, err = export(capsys, r2, tmp_path / "o1.h5ad", tmp_path / "o2.h5ad")
    assert_refused(code, err, "fsdask_selected", "--key-added", "--overwrite")
    assert not (tmp_path / "o2.h5ad").exists()


def test_export_a_second_method_under_its_own_key_keeps_both(tmp_path, h5ad, capsys):
    src, r1, r2 = h5ad
    assert export(capsys, r1, src, tmp_path / "o1.h5ad")[0] == 0
    code, out, err = export(
        capsys, r2, tmp_path / "o1.h5ad", tmp_path / "o2.h5ad", "--key-added", "fsdask_fisher"
    )
    assert code == 0, err and "fsdask_fisher_selected" in out
    b = anndata.read_h5ad(tmp_path / "o2.h5ad")
    res1, res2 = fsdask.open_result(r1), fsdask.open_result(r2)
    np.testing.assert_array_equal(b.var["fsdask_rank"].to_numpy(), res1["rank"].values)
    np.testing.assert_array_equal(b.var["fsdask_fisher_rank"].to_numpy(), res2["rank"].values)
    assert b.uns["fsdask"]["method"] == "ttest" and b.uns["fsdask_fisher"]["method"] == "fisher"
    assert list(b.var["symbol"]) == [f"S{j}" for j in range(P)]


def test_export_same_key_with_overwrite_replaces_the_columns(tmp_path, h5ad, capsys):
    src, r1, r2 = h5ad
    assert export(capsys, r1, src, tmp_path / "o1.h5ad")[0] == 0
    code, _, err = export(capsys, r2, tmp_path / "o1.h5ad", tmp_path / "o2.h5ad", "--overwrite")
    assert code == 0, err
    b = anndata.read_h5ad(tmp_path / "o2.h5ad")
    np.testing.assert_array_equal(
        b.var["fsdask_rank"].to_numpy(), fsdask.open_result(r2)["rank"].values
    )
    assert b.uns["fsdask"]["method"] == "fisher"


def test_export_anndata_zarr_with_key_added(tmp_path, h5ad, capsys):
    src, r1, _ = h5ad
    anndata.read_h5ad(src).write_zarr(tmp_path / "in.zarr")
    code, _, err = export(capsys, r1, tmp_path / "in.zarr", tmp_path / "o.zarr", "--key-added", "k")
    assert code == 0, err
    b = anndata.read_zarr(tmp_path / "o.zarr")
    assert int(b.var["k_selected"].sum()) == 3 and b.uns["k"]["method"] == "ttest"
    assert not [n for n in os.listdir(tmp_path) if ".tmp-" in n]


def test_export_with_duplicate_var_names_is_refused(tmp_path, h5ad, capsys):
    src, r1, _ = h5ad
    a = anndata.read_h5ad(src)
    a.var_names = ["g0", "g0"] + list(a.var_names[2:])
    a.write_h5ad(tmp_path / "dup.h5ad")
    code, _, err = export(capsys, r1, tmp_path / "dup.h5ad", tmp_path / "o.h5ad")
    assert_refused(code, err, "var_names are not unique", "var_names_make_unique")
    assert sorted(os.listdir(tmp_path)) == sorted(["in.h5ad", "r1.zarr", "r2.zarr", "dup.h5ad"])


@contextlib.contextmanager
def read_only(folder):
    """``folder`` made unwritable: immutable for root (chattr +i), mode 0555 otherwise."""
    if os.geteuid() == 0:
        if shutil.which("chattr") is None or subprocess.run(["chattr", "+i", folder]).returncode:
            pytest.skip("root, and chattr +i is not available here")
        try:
            yield
        finally:
            subprocess.run(["chattr", "-i", folder])
        return
    os.chmod(folder, 0o555)
    try:
        yield
    finally:
        os.chmod(folder, 0o755)


def test_export_into_a_read_only_folder_is_refused(tmp_path, h5ad, capsys):
    src, r1, _ = h5ad
    ro = tmp_path / "ro"
    ro.mkdir()
    with read_only(ro):
        code, _, err = export(capsys, r1, src, ro / "o.h5ad")
    assert_refused(code, err, str(ro), "not writable")
    assert os.listdir(ro) == []


def test_export_under_a_file_is_refused(tmp_path, h5ad, capsys):
    src, r1, _ = h5ad
    (tmp_path / "afile").write_text("x")
    code, _, err = export(capsys, r1, src, tmp_path / "afile" / "o.h5ad")
    assert_refused(code, err, "is a file, not a folder")
    assert (tmp_path / "afile").read_text() == "x"


def test_export_into_a_full_folder_is_refused(tmp_path, h5ad, capsys, monkeypatch):
    src, r1, _ = h5ad
    real = shutil.copyfile

    def full_disk(a, b, **kw):  # as a full disk fails: part of the copy written, then ENOSPC
        real(a, b, **kw)
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), b)

    monkeypatch.setattr(shutil, "copyfile", full_disk)
    code, _, err = export(capsys, r1, src, tmp_path / "sub" / "o.h5ad")
    assert_refused(code, err, "No space left on device")
    assert sorted(os.listdir(tmp_path)) == ["in.h5ad", "r1.zarr", "r2.zarr"]  # nothing behind


def test_export_never_replaces_an_output_that_appears_meanwhile(
    tmp_path, h5ad, capsys, monkeypatch
):
    src, r1, _ = h5ad
    out = tmp_path / "o.h5ad"
    real = shutil.copyfile

    def another_writer(a, b, **kw):  # someone else creates the output while fsdask copies
        real(a, b, **kw)
        out.write_text("someone else's")

    monkeypatch.setattr(shutil, "copyfile", another_writer)
    code, _, err = export(capsys, r1, src, out)
    assert_refused(code, err, str(out))
    assert out.read_text() == "someone else's"
    assert not [n for n in os.listdir(tmp_path) if ".tmp-" in n]


# ---- 3. damaged files, full disks
def truncated(src, dst):
    raw = src.read_bytes()
    dst.write_bytes(raw[: len(raw) // 2])
    return dst


@pytest.mark.parametrize("command", ["info", "select", "export"])
def test_truncated_h5ad_is_named_damaged(tmp_path, h5ad, capsys, command):
    src, r1, _ = h5ad
    bad = truncated(src, tmp_path / "bad.h5ad")
    argv = {
        "info": ["info", bad],
        "select": ["select", bad, "--method", "ttest", "-o", tmp_path / "r.zarr"],
        "export": ["export", r1, "--anndata", bad, "-o", tmp_path / "o.h5ad"],
    }[command]
    code, _, err = run(capsys, *argv)
    assert_refused(code, err, str(bad), "damaged")
    assert not (tmp_path / "r.zarr").exists() and not (tmp_path / "o.h5ad").exists()


def test_flipped_bits_in_h5ad_end_in_one_line(tmp_path, h5ad, capsys):
    src, r1, _ = h5ad
    raw = src.read_bytes()
    bad = tmp_path / "flip.h5ad"
    outcomes = []
    for off in range(0, len(raw), max(1, len(raw) // 40)):
        b = bytearray(raw)
        b[off] ^= 0x10
        bad.write_bytes(bytes(b))
        for argv in (["info", bad], ["export", r1, "--anndata", bad, "-o", tmp_path / "o.h5ad"]):
            code, _, err = run(capsys, *argv)
            outcomes.append((off, argv[0], code, err.strip()))
            if (tmp_path / "o.h5ad").exists():
                os.remove(tmp_path / "o.h5ad")
    wrong = [o for o in outcomes if o[2] not in (0, 2) or len(o[3].splitlines()) > 1]
    assert wrong == []


def enospc(*args, **kwargs):
    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))


def test_rechunk_copy_onto_a_full_tmpdir(tmp_path, monkeypatch, capsys):
    import dask.array as da
    import xarray as xr

    X = RNG.normal(size=(40, 30))
    xr.Dataset(
        {"X": (("sample", "feature"), X)}, coords={"feature": [f"f{j}" for j in range(30)]}
    ).to_zarr(tmp_path / "rows.zarr", encoding={"X": {"chunks": (10, 30)}}, zarr_format=3)
    monkeypatch.setattr(da, "store", enospc)  # every chunk write of the copy: disk full
    monkeypatch.setenv("TMPDIR", str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()
    monkeypatch.setattr("tempfile.tempdir", None)
    code, _, err = run(  # ingest: feature blocks (info reads a store by samples as stored)
        capsys,
        "ingest",
        tmp_path / "rows.zarr",
        tmp_path / "out.zarr",
        "--memory-budget",
        "8KiB",
        "--sample-dim",
        "sample",
    )
    if code == 0:
        pytest.skip("no copy was needed for this store at this budget")
    assert_refused(code, err, "rechunked copy", "No space left on device", "TMPDIR")
    assert os.listdir(tmp_path / "tmp") == []


def test_csr_copy_onto_a_full_tmpdir(tmp_path, monkeypatch, capsys):
    import fsspec.implementations.local as local
    import scipy.sparse as sp

    n, p = 3000, 17000  # four feature blocks of the default size: the CSR is copied
    M = sp.random(n, p, density=0.0002, format="csr", dtype=np.float32, random_state=1)
    a = anndata.AnnData(M)
    a.obs["cell_type"] = pd.Categorical(np.repeat(["a", "b"], n // 2))
    a.write_h5ad(tmp_path / "csr.h5ad")
    monkeypatch.setattr(local.LocalFileSystem, "pipe_file", enospc)
    monkeypatch.setattr("tempfile.tempdir", str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()
    code, _, err = run(
        capsys,
        "select",
        tmp_path / "csr.h5ad",
        "--method",
        "ks",  # needs feature blocks: the CSR is copied (ttest reads it by cells, no copy)
        "-o",
        tmp_path / "r.zarr",
        "--memory-budget",
        "64MiB",
    )
    assert_refused(code, err, "per-block copy", "No space left on device")
    assert os.listdir(tmp_path / "tmp") == [] and not (tmp_path / "r.zarr").exists()


@pytest.fixture
def full_disk(tmp_path):
    """A real, full file system: a 1 MiB tmpfs filled to the last block (root only)."""
    where = tmp_path / "full"
    where.mkdir()
    if (
        os.geteuid() != 0
        or subprocess.run(
            ["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(where)], capture_output=True
        ).returncode
    ):
        pytest.skip("cannot mount a tmpfs here")
    try:
        with contextlib.suppress(OSError), open(where / "filler", "wb") as fh:
            while True:
                fh.write(b"\0" * 4096)
                fh.flush()
        yield where
    finally:
        subprocess.run(["umount", str(where)])


def test_disk_full_before_the_run_starts(full_disk, data, capsys):
    code, _, err = select(capsys, data, full_disk / "r.zarr")
    assert_refused(code, err, "No space left on device")
    assert os.listdir(full_disk) == ["filler"]


def test_export_onto_a_real_full_disk(full_disk, h5ad, capsys):
    src, r1, _ = h5ad
    code, _, err = export(capsys, r1, src, full_disk / "o.h5ad")
    assert_refused(code, err, "No space left on device")
    assert os.listdir(full_disk) == ["filler"]


# ---- 5. info describes a CSR AnnData from its metadata: no copy
def test_info_on_a_csr_anndata_makes_no_copy(tmp_path, monkeypatch, capsys):
    import scipy.sparse as sp

    n, p = 4000, 13000  # four feature blocks of the default size: a stored CSR would be copied
    M = sp.random(n, p, density=0.0005, format="csr", dtype=np.float32, random_state=2)
    a = anndata.AnnData(M)
    a.obs["cell_type"] = pd.Categorical(np.repeat(["a", "b"], n // 2))
    a.var["symbol"] = [f"S{j}" for j in range(p)]
    a.write_h5ad(tmp_path / "csr.h5ad")
    (tmp_path / "tmp").mkdir()
    monkeypatch.setattr("tempfile.tempdir", str(tmp_path / "tmp"))
    code, out, err = run(capsys, "info", tmp_path / "csr.h5ad")
    assert code == 0, err
    assert os.listdir(tmp_path / "tmp") == []  # nothing written
    assert "per-block copy" not in err and "filing" not in err
    assert f"{n} samples × {p} features" in out
    assert f"csr_matrix, {M.nnz} non-zeros" in out
    assert "obs columns: cell_type" in out and "var columns: symbol" in out


# ---- the store listing test itself, on stores zarr-python writes
@pytest.mark.parametrize(
    "layout",
    ["default-encoding", "v2-encoding", "sharded"],
)
def test_a_zarr_written_store_holds_only_its_own_keys(tmp_path, layout):
    import json

    import zarr

    from fsdask.io.layout import foreign_keys, local_keys

    g = zarr.open_group(tmp_path / "s.zarr", mode="w", zarr_format=3)
    kw = {"chunks": (4, 5)}
    if layout == "v2-encoding":
        kw["chunk_key_encoding"] = {"name": "v2", "separator": "."}
    if layout == "sharded":
        kw = {"chunks": (2, 5), "shards": (4, 5)}
    a = g.create_array("X", shape=(10, 12), dtype="f4", **kw)
    a[:] = np.arange(120, dtype="f4").reshape(10, 12)
    g.create_array("scalar", shape=(), dtype="i8")[...] = 3

    def meta(node):
        with open(os.path.join(tmp_path / "s.zarr", *node.split("/"), "zarr.json")) as fh:
            return json.load(fh)

    root = tmp_path / "s.zarr"
    assert foreign_keys(local_keys(root), meta) == []
    # anything else, even named like a chunk outside the grid, is someone else's
    chunk = "X/c/9/0" if layout != "v2-encoding" else "X/9.0"
    for extra in ("notes.txt", "X/notes.txt", chunk):
        (root / extra).parent.mkdir(parents=True, exist_ok=True)
        (root / extra).write_bytes(b"mine")
        assert foreign_keys(local_keys(root), meta) == [extra]
        (root / extra).unlink()


def test_export_inside_the_input_store_is_refused(tmp_path, h5ad, capsys):
    src, r1, _ = h5ad
    anndata.read_h5ad(src).write_zarr(tmp_path / "in.zarr")
    before = sorted(os.listdir(tmp_path / "in.zarr"))
    code, _, err = export(capsys, r1, tmp_path / "in.zarr", tmp_path / "in.zarr" / "o.zarr")
    assert_refused(code, err, "inside the input")
    assert sorted(os.listdir(tmp_path / "in.zarr")) == before
