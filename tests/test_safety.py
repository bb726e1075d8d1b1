"""Lose no data, ever: a catalogue of destructive, corrupting and malformed cases.

Each case runs the real CLI entry point (``fsdask.cli.main``) or the public API on real Zarr
stores (and a real moto S3 server for the object-storage cases) and checks three things: the
exit status (2 for bad input or storage, one line on stderr), the message, and that nothing
that was there before is lost or half-written.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest
import xarray as xr
import yaml

import fsdask
from fsdask.cli import main
from fsdask.errors import InputError

FAKE_KEY = "AKIAFSDASKFAKEKEY0042"
FAKE_SECRET = "fsdask-fake-SECRET-d41d8cd98f00b204"


def cli(capsys, *argv):
    code = main([str(a) for a in argv])
    cap = capsys.readouterr()
    return code, cap.out, cap.err


def one_line_error(code, err, *fragments):
    assert code == 2, err
    assert err.count("\n") == 1 and "Traceback" not in err, err
    for f in fragments:
        assert f in err, (f, err)


@pytest.fixture
def data(tmp_path, rng):
    X = rng.normal(size=(10, 40)).astype(np.float32)
    X[5:, :3] += 2
    fsdask.ingest(X, tmp_path / "d.zarr", y=[0] * 5 + [1] * 5, chunk_bytes=10 * 4 * 16)
    return tmp_path / "d.zarr"


def snapshot(path):
    """Every file under ``path`` with its bytes (a folder) or the bytes of a file."""
    if os.path.isfile(path):
        return open(path, "rb").read()
    return {
        os.path.relpath(os.path.join(d, f), path): open(os.path.join(d, f), "rb").read()
        for d, _, files in os.walk(path)
        for f in files
    }


def hidden_leftovers(folder):
    return [p for p in os.listdir(folder) if p.startswith(".")]


# ------------------------------------------------------------------------------------------
# 1. outputs never destroy what they do not own
# ------------------------------------------------------------------------------------------


def _user_folder(tmp_path):
    (tmp_path / "keep").mkdir()
    (tmp_path / "keep" / "thesis.txt").write_text("years of work")
    return tmp_path / "keep"


def _regular_file(tmp_path):
    (tmp_path / "notes.txt").write_text("do not lose me")
    return tmp_path / "notes.txt"


@pytest.mark.parametrize("overwrite", [False, True])
@pytest.mark.parametrize(
    "case",
    [
        "user-folder",
        "input-store",
        "cwd",
        "regular-file",
        "npz-input",
        "ingest-non-store",
        "report-onto-file",
        "other-kind",
        "result-with-notes",
    ],
)
def test_outputs_never_destroy(capsys, tmp_path, data, monkeypatch, case, overwrite):
    np.savez(
        tmp_path / "g.npz", X=np.random.default_rng(1).normal(size=(10, 8)), y=np.array([0, 1] * 5)
    )
    sel = ["select", data, "--method", "ttest", "--no-progress"]
    if case == "user-folder":
        target, argv, msg = (
            _user_folder(tmp_path),
            sel + ["-o", tmp_path / "keep"],
            "folder with other content",
        )
    elif case == "input-store":
        target, argv, msg = data, sel + ["-o", data], "the input"
    elif case == "cwd":
        _user_folder(tmp_path)
        monkeypatch.chdir(tmp_path / "keep")
        target, argv, msg = tmp_path / "keep", sel + ["-o", "."], "other content"
    elif case == "regular-file":
        target, argv, msg = (
            _regular_file(tmp_path),
            sel + ["-o", tmp_path / "notes.txt"],
            "a file is there",
        )
    elif case == "npz-input":
        target = tmp_path / "g.npz"
        argv, msg = (
            ["evaluate", target, "--method", "ttest", "--max-features", "2", "-o", target],
            "the input",
        )
    elif case == "ingest-non-store":
        target, argv, msg = (
            _user_folder(tmp_path),
            ["ingest", tmp_path / "g.npz", tmp_path / "keep"],
            "other content",
        )
    elif case == "report-onto-file":
        fsdask.write_result(
            fsdask.get_method("ttest").fit(fsdask.open_dataset(data)).result_, tmp_path / "r.zarr"
        )
        target = _regular_file(tmp_path)
        argv, msg = ["report", tmp_path / "r.zarr", "--out", target], "a file is there"
    elif case == "result-with-notes":  # an fsdask result the user added a file to
        fsdask.write_result(
            fsdask.get_method("ttest").fit(fsdask.open_dataset(data)).result_, tmp_path / "x.zarr"
        )
        (tmp_path / "x.zarr" / "NOTES.txt").write_text("mine")
        target, argv, msg = (
            tmp_path / "x.zarr",
            sel + ["-o", tmp_path / "x.zarr"],
            "other files added (NOTES.txt)",
        )
    else:  # an fsdask output of another kind
        target, argv, msg = data, ["ingest", tmp_path / "g.npz", tmp_path / "x.zarr"], None
        fsdask.write_result(
            fsdask.get_method("ttest").fit(fsdask.open_dataset(data)).result_, tmp_path / "x.zarr"
        )
        target, msg = tmp_path / "x.zarr", "an fsdask result is there, not a dataset"
    before = snapshot(target)
    code, _, err = cli(capsys, *argv, *(["--overwrite"] if overwrite else []))
    one_line_error(code, err, msg)
    assert snapshot(target) == before
    assert not [p for p in hidden_leftovers(tmp_path) if "fsdask" in p or ".tmp" in p]


def test_existing_result_needs_overwrite_and_is_replaced_whole(capsys, tmp_path, data):
    out = tmp_path / "r.zarr"
    base = ["select", data, "--method", "ttest", "--no-progress", "-o", out, "--param"]
    assert cli(capsys, *base, "n_features_to_select=3")[0] == 0
    code, _, err = cli(capsys, *base, "n_features_to_select=5")
    one_line_error(code, err, "already exists", "--overwrite")
    assert int(fsdask.open_result(out)["selected"].sum()) == 3
    assert cli(capsys, *base, "n_features_to_select=5", "--overwrite")[0] == 0
    assert int(fsdask.open_result(out)["selected"].sum()) == 5
    assert hidden_leftovers(tmp_path) == []


def test_output_checked_before_the_fit(capsys, tmp_path, data):
    # the fit would fail (99 > 40 features); the output problem is reported first, so no fit ran
    _regular_file(tmp_path)
    code, _, err = cli(
        capsys,
        "select",
        data,
        "--method",
        "ttest",
        "--param",
        "n_features_to_select=5",
        "-o",
        tmp_path / "r.zarr",
        "--csv",
        tmp_path / "notes.txt",
        "--no-progress",
    )
    one_line_error(code, err, "notes.txt", "a file is there")
    assert not (tmp_path / "r.zarr").exists()


@pytest.mark.parametrize("where", ["local", "s3"])
def test_failed_write_keeps_the_old_output_whole(tmp_path, data, where, request):
    from fsdask.io.ingest import lazy_from_blocks

    res = fsdask.get_method("ttest").fit(fsdask.open_dataset(data)).result_
    if where == "s3":
        bucket, opts = request.getfixturevalue("s3")
        url = f"{bucket}/r.zarr"
    else:
        url, opts = str(tmp_path / "r.zarr"), None
    fsdask.write_result(res, url, storage_options=opts)

    def block(j0, j1):
        if j0 >= 20:
            raise OSError("disk full")
        return np.zeros((1, j1 - j0))

    bad = res.assign(extra=(("one", "feature"), lazy_from_blocks(block, 1, 40, block=10)))
    with pytest.raises(OSError, match="disk full"):
        fsdask.write_result(bad, url, storage_options=opts, overwrite=True)
    back = fsdask.open_result(url, storage_options=opts)
    assert "extra" not in back and np.array_equal(back["weight"].values, res["weight"].values)
    if where == "local":
        assert hidden_leftovers(tmp_path) == []


def test_killed_run_temporaries_are_cleaned_by_the_next_run(capsys, tmp_path, data):
    from fsdask.io.outputs import host_tag

    dead = tmp_path / f".r.zarr.fsdask-tmp-{host_tag()}-999999999-deadbeef"  # no such process
    legacy = tmp_path / ".r.zarr.tmp-0123abcd"  # an older fsdask's temporary
    running = (
        tmp_path / f".r.zarr.fsdask-tmp-otherhost-{os.getpid()}-0badcafe"
    )  # another host, recent
    for d in (dead, legacy, running):
        d.mkdir()
        (d / "zarr.json").write_text("{}")
    (tmp_path / ".r.zarr.notes").write_text("the user's, not fsdask's")
    assert (
        cli(
            capsys, "select", data, "--method", "ttest", "-o", tmp_path / "r.zarr", "--no-progress"
        )[0]
        == 0
    )
    assert sorted(hidden_leftovers(tmp_path)) == [
        f".r.zarr.fsdask-tmp-otherhost-{os.getpid()}-0badcafe",
        ".r.zarr.notes",
    ]


# ------------------------------------------------------------------------------------------
# 2 / 8. object storage: bad input over an existing store; evaluate -o and report on S3
# ------------------------------------------------------------------------------------------


def _so_args(opts):
    return [a for k, v in opts.items() for a in ("--storage-option", f"{k}={v}")]


def test_s3_overwrite_with_bad_csv_keeps_the_old_store(capsys, tmp_path, s3, rng):
    bucket, opts = s3
    url = f"{bucket}/d.zarr"
    np.savez(tmp_path / "g.npz", X=rng.normal(size=(6, 5)), y=np.array([0, 1] * 3))
    assert cli(capsys, "ingest", tmp_path / "g.npz", url, *_so_args(opts))[0] == 0
    fp = fsdask.open_dataset(url, storage_options=opts).attrs["fingerprint"]
    (tmp_path / "bad.csv").write_text("id,a,b,label\ns1,1,2,x\ns2,1,2,3,4,5\ns3,oops\n")
    code, _, err = cli(
        capsys,
        "ingest",
        tmp_path / "bad.csv",
        url,
        "--label",
        "label",
        "--overwrite",
        *_so_args(opts),
    )
    one_line_error(code, err, "bad.csv")
    assert fsdask.open_dataset(url, storage_options=opts).attrs["fingerprint"] == fp
    import s3fs

    fs = s3fs.S3FileSystem(**opts)
    assert [p for p in fs.ls(bucket.removeprefix("s3://"), refresh=True) if "fsdask-tmp" in p] == []
    # a good replacement does replace it
    np.savez(tmp_path / "h.npz", X=rng.normal(size=(6, 7)), y=np.array([0, 1] * 3))
    assert cli(capsys, "ingest", tmp_path / "h.npz", url, "--overwrite", *_so_args(opts))[0] == 0
    assert fsdask.open_dataset(url, storage_options=opts).sizes["feature"] == 7


def test_s3_swap_failing_midway_keeps_the_new_output(capsys, tmp_path, s3, rng, monkeypatch):
    """A fault while the finished store is copied over the old one (S3 has no rename) must not
    lose both: the complete new output stays under its temporary key and the error says where."""
    import s3fs

    from fsdask.io import location

    bucket, opts = s3
    url = f"{bucket}/swap.zarr"
    np.savez(tmp_path / "a.npz", X=rng.normal(size=(6, 5)), y=np.array([0, 1] * 3))
    np.savez(tmp_path / "b.npz", X=rng.normal(size=(6, 7)), y=np.array([0, 1] * 3))
    assert cli(capsys, "ingest", tmp_path / "a.npz", url, *_so_args(opts))[0] == 0
    real = location.copy_over

    class Flaky:  # the real file system, whose connection drops after two copies
        def __init__(self, fs):
            self.fs, self.left = fs, 2

        def copy(self, *a, **k):
            if self.left == 0:
                raise ConnectionResetError("connection reset by peer")
            self.left -= 1
            return self.fs.copy(*a, **k)

        def __getattr__(self, name):
            return getattr(self.fs, name)

    monkeypatch.setattr(location, "copy_over", lambda fs, src, dst: real(Flaky(fs), src, dst))
    code, _, err = cli(capsys, "ingest", tmp_path / "b.npz", url, "--overwrite", *_so_args(opts))
    one_line_error(code, err, "failed midway", "kept at")
    kept = err.split("kept at ", 1)[1].split(" ")[0]
    assert ".fsdask-tmp-" in kept
    assert fsdask.open_dataset(kept, storage_options=opts).sizes["feature"] == 7
    s3fs.S3FileSystem.clear_instance_cache()


def test_secrets_never_printed_and_s3_evaluation_and_report(capsys, tmp_path, s3_endpoint, rng):
    """A pipeline on S3 with distinctive fake credentials: no output, file or attribute shows them;
    evaluate -o s3://… and report --evaluation s3://… honour the storage options."""
    import s3fs

    opts = {"endpoint_url": s3_endpoint, "key": FAKE_KEY, "secret": FAKE_SECRET}
    fs = s3fs.S3FileSystem(**opts)  # moto accepts any credentials
    fs.mkdir("secretive")
    X = rng.normal(size=(12, 9))
    X[6:, 0] += 3
    np.savez(tmp_path / "g.npz", X=X, y=np.array([0] * 6 + [1] * 6))
    cfg = {
        "scheduler": "threads",
        "storage_options": opts,
        "steps": [
            {"name": "ingest", "ingest": {"source": "g.npz", "url": "s3://secretive/g.zarr"}},
            {
                "name": "sel",
                "select": {
                    "url": "s3://secretive/g.zarr",
                    "method": "ttest",
                    "output": "s3://secretive/r.zarr",
                    "param": {"n_features_to_select": 2},
                    "progress": "false",
                },
            },
            {
                "name": "ev",
                "evaluate": {
                    "data": "s3://secretive/g.zarr",
                    "method": "ttest",
                    "max_features": 3,
                    "output": "s3://secretive/ev.zarr",
                },
            },
            {
                "name": "rep",
                "report": {
                    "result": "s3://secretive/r.zarr",
                    "evaluation": ["s3://secretive/ev.zarr"],
                    "out": "rep",
                },
            },
            {
                "name": "boom",
                "info": {"url": f"s3://{FAKE_KEY}:{FAKE_SECRET}@secretive/missing.zarr"},
            },
        ],
    }
    (tmp_path / "p.yaml").write_text(yaml.safe_dump(cfg))
    code, out, err = cli(capsys, "-v", "run", tmp_path / "p.yaml")
    assert code == 2 and "step 5 (boom)" in err, err
    assert fs.exists("secretive/ev.zarr/zarr.json") and (tmp_path / "rep" / "index.html").exists()
    written = [
        json.dumps(dict(fsdask.open_result("s3://secretive/r.zarr", storage_options=opts).attrs)),
        (tmp_path / "p.state.json").read_text(),
        (tmp_path / "rep" / "index.html").read_text(),
    ]
    for text in [out, err, *written]:
        assert FAKE_KEY not in text and FAKE_SECRET not in text
    assert "***" in out  # the step lines show that options were given, not their values


# ------------------------------------------------------------------------------------------
# 3. reads verify
# ------------------------------------------------------------------------------------------


def _flip(path):
    b = bytearray(path.read_bytes())
    b[len(b) // 2] ^= 0x10
    path.write_bytes(bytes(b))


def test_flipped_byte_fails_select_and_verify(capsys, tmp_path, data):
    assert cli(capsys, "verify", data)[0] == 0
    _flip(data / "X" / "c" / "0" / "1")
    code, _, err = cli(
        capsys, "select", data, "--method", "ttest", "-o", tmp_path / "r.zarr", "--no-progress"
    )
    one_line_error(code, err, "d.zarr", "features 16–31")
    assert not (tmp_path / "r.zarr").exists()
    code, _, err = cli(capsys, "verify", data)
    one_line_error(code, err, "d.zarr", "features 16–31")


@pytest.mark.cluster
def test_corrupt_chunk_on_a_local_cluster_is_one_line_without_worker_tracebacks(tmp_path, data):
    """On ``--scheduler local:2`` the failing task runs in a worker process: its traceback and
    the nannies' shutdown chatter must not bury the one-line error."""
    _flip(data / "X" / "c" / "0" / "1")
    p = subprocess.run(
        [
            sys.executable,
            "-m",
            "fsdask.cli",
            "select",
            str(data),
            "--method",
            "ttest",
            "--scheduler",
            "local:2",
            "-o",
            str(tmp_path / "r.zarr"),
            "--no-progress",
        ],
        capture_output=True,
        text=True,
        timeout=180,
    )
    lines = [ln for ln in p.stderr.splitlines() if ln.strip()]
    assert p.returncode == 2, p.stderr
    assert len(lines) == 1 and "features 16–31" in lines[0], p.stderr
    assert not (tmp_path / "r.zarr").exists()


def test_old_store_without_checksums_opens_unverified_and_verify_finds_changes(
    capsys, tmp_path, rng, caplog
):
    X = rng.normal(size=(6, 12)).astype(np.float32)
    ds = xr.Dataset(
        {"X": (("sample", "feature"), X)}, coords={"sample": np.arange(6), "feature": np.arange(12)}
    )
    import dask.array as da

    fp = fsdask.io.store.dataset_fingerprint(da.from_array(X, chunks=(6, 4)))
    ds.attrs.update({"fsdask_format": 1, "fingerprint": fp, "fsdask_complete": True})
    ds.to_zarr(
        tmp_path / "old.zarr", zarr_format=3, consolidated=False, encoding={"X": {"chunks": (6, 4)}}
    )
    with caplog.at_level("WARNING", logger="fsdask"):
        opened = fsdask.open_dataset(tmp_path / "old.zarr")
    assert opened.attrs["verified"] is False and "unverified" in caplog.text
    assert cli(capsys, "verify", tmp_path / "old.zarr")[0] == 0
    import zarr

    zarr.open_array(str(tmp_path / "old.zarr" / "X"), mode="r+")[0, 5] = (
        1e6  # silent bit-rot stand-in
    )
    code, _, err = cli(capsys, "verify", tmp_path / "old.zarr")
    one_line_error(code, err, "content differs", "old.zarr")


def test_result_records_what_was_read(tmp_path, data):
    res = fsdask.get_method("ttest").fit(fsdask.open_dataset(data)).result_
    assert res.attrs["input_fingerprint"] == fsdask.open_dataset(data).attrs["fingerprint"]
    assert fsdask.io.store.verify_dataset(data)["fingerprint"] == res.attrs["input_fingerprint"]


# ------------------------------------------------------------------------------------------
# 5. labels
# ------------------------------------------------------------------------------------------


def test_missing_labels_refused_or_dropped(capsys, tmp_path):
    rows = [
        "id,label,a,b",
        "s1,0,1.0,2.0",
        "s2,1,1.5,2.5",
        "s3,,1.2,2.2",
        "s4,1,0.5,2.9",
        "s5,0,0.1,3.0",
    ]
    (tmp_path / "l.csv").write_text("\n".join(rows) + "\n")
    code, _, err = cli(
        capsys, "ingest", tmp_path / "l.csv", tmp_path / "l.zarr", "--label", "label"
    )
    one_line_error(code, err, "1 sample(s) have no label", "s3", "--drop-unlabelled")
    assert not (tmp_path / "l.zarr").exists()
    code, out, err = cli(
        capsys,
        "ingest",
        tmp_path / "l.csv",
        tmp_path / "l.zarr",
        "--label",
        "label",
        "--drop-unlabelled",
    )
    assert code == 0 and "dropped 1 sample(s) without a label" in out
    ds = fsdask.open_dataset(tmp_path / "l.zarr")
    assert ds.sizes["sample"] == 4 and ds["y"].dtype.kind == "i" and "2 classes" in out
    assert ds.attrs["dropped_unlabelled_samples"] == 1


@pytest.mark.parametrize(
    "y", [[0, 1, np.nan, 1, 0, 1], [0, 1, None, 1, 0, 1], ["a", "b", "", "a", "b", "a"]]
)
def test_api_missing_labels(y, rng):
    with pytest.raises(InputError, match="missing label"):
        fsdask.get_method("f").fit(
            rng.normal(size=(6, 4)), np.array(y, dtype=object if None in y else None)
        )


# ------------------------------------------------------------------------------------------
# 9 / 10. bad input and storage: exit 2 with one line, never 1, nothing written
# ------------------------------------------------------------------------------------------


def _cases(tmp_path, data):
    p = tmp_path
    (p / "ragged.csv").write_text("id,a,b\ns1,1,2\ns2,1,2,3,4\n")
    (p / "binary.csv").write_bytes(bytes(range(256)) * 8)
    (p / "garbage.npz").write_bytes(b"PK\x03\x04 not really a zip" * 10)
    np.savez(p / "pickled.npz", X=np.array([{"a": 1}], dtype=object))
    (p / "dup.csv").write_text("id,a,b,c,d\ns1,1,2,0,1\ns1,3,4,0,1\ns2,5,6,0,1\n")
    (p / "nolabel.csv").write_text("id,a,b,c\ns1,1,2,0\ns2,3,4,1\ns3,5,6,0\ns4,5,6,1\n")
    (p / "allnan.npz").write_bytes(b"")
    X = np.random.default_rng(2).normal(size=(6, 4))
    X[:, 1] = np.nan
    np.savez(p / "allnan.npz", X=X, y=np.array([0, 1] * 3))
    (p / "afolder").mkdir()
    (p / "afile").write_text("x")
    (p / "state-parent").write_text("a file where the state folder should be")
    pipe_state = p / "pstate.yaml"
    pipe_state.write_text(
        yaml.safe_dump({"state": "state-parent/s.json", "steps": [{"info": {"url": str(data)}}]})
    )
    (p / "typo.yaml").write_text(
        yaml.safe_dump({"schduler": "threads", "steps": [{"info": {"url": str(data)}}]})
    )
    (p / "boolstr.yaml").write_text(
        yaml.safe_dump(
            {
                "steps": [
                    {
                        "ingest": {
                            "source": str(p / "allnan.npz"),
                            "url": str(p / "o2.zarr"),
                            "overwrite": "maybe",
                        }
                    }
                ]
            }
        )
    )
    sel = ["select", data, "--method", "ttest", "--no-progress"]
    return {
        "ragged-csv": (["ingest", p / "ragged.csv", p / "o.zarr"], "malformed CSV"),
        "binary-csv": (["ingest", p / "binary.csv", p / "o.zarr"], "not a text CSV"),
        "garbage-npz": (["ingest", p / "garbage.npz", p / "o.zarr"], "not a readable .npz"),
        "pickled-npz": (["ingest", p / "pickled.npz", p / "o.zarr"], "not a readable .npz"),
        "garbage-npz-evaluate": (
            ["evaluate", p / "garbage.npz", "--method", "ttest"],
            "not a readable .npz",
        ),
        "duplicate-ids": (["ingest", p / "dup.csv", p / "o.zarr"], "duplicate sample id 's1'"),
        "absent-label": (
            ["ingest", p / "nolabel.csv", p / "o.zarr", "--label", "klass"],
            "names neither a column",
        ),
        "all-nan-mean": (
            ["ingest", p / "allnan.npz", p / "o.zarr", "--nan-policy", "mean"],
            "no finite value",
        ),
        "chunk-mb-0": (["ingest", p / "allnan.npz", p / "o.zarr", "--chunk-mb", "0"], "--chunk-mb"),
        "chunk-mb-neg": (
            ["ingest", p / "allnan.npz", p / "o.zarr", "--chunk-mb", "-3"],
            "--chunk-mb",
        ),
        "csv-into-folder": (sel + ["-o", p / "r.zarr", "--csv", p / "afolder"], "afolder"),
        "csv-under-file": (
            sel + ["-o", p / "r.zarr", "--csv", p / "afile" / "t.csv"],
            "is a file, not a folder",
        ),
        "negative-top": (sel + ["-o", p / "r.zarr", "--top", "-1"], "--top"),
        "info-negative-top": (["info", data, "--top", "-2"], "--top"),
        "demo-features-0": (["demo", "--out", p / "demo", "--features", "0"], "--features"),
        "pipeline-state-unwritable": (["run", pipe_state], "cannot write the pipeline state"),
        "yaml-typo": (["run", p / "typo.yaml"], "did you mean 'scheduler'"),
        "yaml-bool-string": (["run", p / "boolstr.yaml"], "expected true or false"),
    }


CASES = [
    "ragged-csv",
    "binary-csv",
    "garbage-npz",
    "pickled-npz",
    "garbage-npz-evaluate",
    "duplicate-ids",
    "absent-label",
    "all-nan-mean",
    "chunk-mb-0",
    "chunk-mb-neg",
    "csv-into-folder",
    "csv-under-file",
    "negative-top",
    "info-negative-top",
    "demo-features-0",
    "pipeline-state-unwritable",
    "yaml-typo",
    "yaml-bool-string",
]


@pytest.mark.parametrize("case", CASES)
def test_bad_input_exits_2_with_one_line(capsys, tmp_path, data, case):
    argv, msg = _cases(tmp_path, data)[case]
    code, _, err = cli(capsys, *argv)
    one_line_error(code, err, msg)
    for name in ("o.zarr", "o2.zarr", "r.zarr", "demo"):
        assert not (tmp_path / name).exists(), name


def test_corrupted_label_chunk_and_deleted_chunk(capsys, tmp_path, data):
    import shutil

    shutil.copytree(data, tmp_path / "e.zarr")
    for f in (tmp_path / "d.zarr" / "y" / "c").rglob("*"):
        if f.is_file():
            _flip(f)
    code, _, err = cli(
        capsys, "select", data, "--method", "ttest", "-o", tmp_path / "r.zarr", "--no-progress"
    )
    one_line_error(code, err, "cannot read 'y'", "d.zarr")
    os.remove(tmp_path / "e.zarr" / "X" / "c" / "0" / "2")
    code, _, err = cli(
        capsys,
        "select",
        tmp_path / "e.zarr",
        "--method",
        "ttest",
        "-o",
        tmp_path / "r.zarr",
        "--no-progress",
    )
    one_line_error(code, err, "missing from the store", "features 32–39")
    assert not (tmp_path / "r.zarr").exists()


def test_api_inputs_give_fsdask_errors(rng):
    import dask.array as da

    est = fsdask.get_method("ttest")
    with pytest.raises(InputError, match="must be 2-D"):
        est.fit(rng.normal(size=8), [0, 1] * 4)
    with pytest.raises(InputError, match="1-D"):
        est.fit(rng.normal(size=(8, 3)), np.zeros((8, 2)))
    X = da.from_array(rng.normal(size=(8, 3)), chunks=(4, 3))
    with pytest.raises(InputError, match="unknown chunk sizes"):
        est.fit(X[X[:, 0] > -100], [0, 1] * 4)
    X16 = rng.normal(size=(8, 3)).astype(np.float16)
    w16 = fsdask.get_method("ttest").fit(X16, [0, 1] * 4).result_["weight"].values
    w32 = (
        fsdask.get_method("ttest").fit(X16.astype(np.float32), [0, 1] * 4).result_["weight"].values
    )
    np.testing.assert_array_equal(w16, w32)


def test_unexpected_error_says_where_to_report(capsys, tmp_path, data, monkeypatch):
    import fsdask.results

    monkeypatch.setattr(fsdask.results, "print_top", lambda *a, **k: 1 / 0)
    code, _, err = cli(
        capsys, "select", data, "--method", "ttest", "-o", tmp_path / "r.zarr", "--no-progress"
    )
    assert code == 1 and "ZeroDivisionError" in err and "this is a bug in fsdask" in err


def test_report_escapes_attributes_and_failed_report_leaves_nothing(capsys, tmp_path, data):
    res = fsdask.get_method("ttest").fit(fsdask.open_dataset(data)).result_
    res.attrs.update({"converged": "<script>alert(1)</script>", "objective": [3.0, 2.0, 1.0]})
    fsdask.write_result(res, tmp_path / "r.zarr")
    assert cli(capsys, "report", tmp_path / "r.zarr", "--out", tmp_path / "rep")[0] == 0
    assert "<script>" not in (tmp_path / "rep" / "index.html").read_text()
    # a report that fails midway (the dataset does not match the result) leaves nothing
    np.savez(tmp_path / "other.npz", X=np.zeros((4, 3)), y=np.array([0, 1, 0, 1]))
    code, _, err = cli(
        capsys,
        "report",
        tmp_path / "r.zarr",
        "--data",
        tmp_path / "other.npz",
        "--out",
        tmp_path / "rep2",
    )
    assert code == 2 and not (tmp_path / "rep2").exists()
    assert not [p for p in hidden_leftovers(tmp_path) if "rep2" in p]
    # replacing a report needs --overwrite and keeps it whole otherwise
    code, _, err = cli(capsys, "report", tmp_path / "r.zarr", "--out", tmp_path / "rep")
    one_line_error(code, err, "already exists")
    assert (
        cli(
            capsys, "report", tmp_path / "r.zarr", "--out", tmp_path / "rep", "--overwrite", "--csv"
        )[0]
        == 0
    )
    assert (tmp_path / "rep" / "ranked.csv").exists()


def test_csv_names_with_commas_and_quotes_round_trip(tmp_path, rng):
    import pandas as pd

    names = ["plain", "with,comma", 'with "quote"', "new\nline", "x"]
    fsdask.ingest(rng.normal(size=(6, 5)), tmp_path / "n.zarr", y=[0, 1] * 3, feature_names=names)
    res = fsdask.get_method("ttest").fit(fsdask.open_dataset(tmp_path / "n.zarr")).result_
    fsdask.results.write_csv(res, tmp_path / "t.csv")
    back = pd.read_csv(tmp_path / "t.csv", dtype={"feature": str})
    assert sorted(back["feature"]) == sorted(names) and list(back["rank"]) == [1, 2, 3, 4, 5]


def test_info_into_a_closed_pipe_is_quiet(data):
    code = (
        "import sys, fsdask.cli, os; r, w = os.pipe(); os.close(r); os.dup2(w, 1); "
        f"sys.exit(fsdask.cli.main(['info', {str(data)!r}]))"
    )
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert p.returncode == 0 and "Traceback" not in p.stderr and "BrokenPipe" not in p.stderr, (
        p.stderr
    )


def test_pipeline_boolean_strings_mean_what_they_say(tmp_path):
    from fsdask.api import select
    from fsdask.pipeline import Step
    from fsdask.pipeline import step_kwargs as _kwargs

    opts = {"url": "d.zarr", "method": "ttest", "output": "r.zarr"}
    for text, value in (("false", False), ("no", False), ("true", True), (False, False)):
        kwargs = _kwargs(
            Step("s", "select", {**opts, "overwrite": text, "no_progress": text}), select, {}
        )
        assert kwargs["overwrite"] is value and kwargs["progress"] is (not value)
