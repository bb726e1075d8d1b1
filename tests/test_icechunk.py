"""Icechunk repositories in and out (issue 45): real repositories, locally and on the moto S3
server (through the fault proxy of tests/faultproxy.py), real pipelines."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys

import numpy as np
import pytest

import fsdask
from fsdask.api import select
from fsdask.api.runs import history_path, read_history, table
from fsdask.errors import MissingDependencyError, ParameterError, StoreError
from fsdask.io.icechunk import IcechunkRef
from fsdask.io.location import IcechunkLocation, Location
from fsdask.pipeline import exit_code, run_pipeline
from fsdask.pipeline.lineage import lineage_path, read_lineage

icechunk = pytest.importorskip("icechunk")


def _data(seed: int = 0, shift: int = 0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(20, 40)).astype(np.float32)
    y = np.repeat([0, 1], 10)
    X[y == 1, shift : shift + 3] += 2.0
    return X, y


def _repo(path, so=None):
    """The repository at a local path (or an IcechunkRef on S3), opened around fsdask."""
    if isinstance(path, IcechunkRef):
        bucket, _, prefix = path.path.partition("/")
        storage = icechunk.s3_storage(
            bucket=bucket,
            prefix=prefix,
            endpoint_url=so["endpoint_url"],
            allow_http=True,
            force_path_style=True,
            access_key_id=so["key"],
            secret_access_key=so["secret"],
            region="us-east-1",
        )
    else:
        storage = icechunk.local_filesystem_storage(str(path))
    return icechunk.Repository.open(storage)


def _messages(repo, branch="main") -> list[str]:
    return [s.message for s in repo.ancestry(branch=branch)]


# ------------------------------------------------------------------------------ URLs
def test_url_forms(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    ref = IcechunkRef.parse("icechunk:///data/repo?tag=night-1&group=results/ttest")
    assert (ref.backend, ref.path, ref.tag, ref.group) == (
        "local",
        "/data/repo",
        "night-1",
        "results/ttest",
    )
    assert ref.on_branch is None and IcechunkRef.parse(ref.url) == ref
    rel = IcechunkRef.parse("icechunk://rel/repo")
    assert rel.path == str(tmp_path / "rel" / "repo") and rel.on_branch == "main"
    s3 = IcechunkRef.parse("icechunk+s3://bucket/pre/fix?snapshot=ABC")
    assert (s3.backend, s3.path, s3.snapshot, s3.version) == (
        "s3",
        "bucket/pre/fix",
        "ABC",
        "snapshot ABC",
    )
    assert isinstance(Location.of("icechunk+s3://bucket/x"), IcechunkLocation)
    for bad, match in [
        ("icechunk:///r?branch=a&tag=b", "one of branch="),
        ("icechunk:///r?brnach=a", "unknown URL option"),
        ("icechunk+s3://KEY:s3cr3t-42@bucket/x", "credentials"),
    ]:
        with pytest.raises(ParameterError, match=match) as info:
            IcechunkRef.parse(bad)
        assert "s3cr3t-42" not in str(info.value) and "\n" not in str(info.value)


def test_without_icechunk_a_one_line_message(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "icechunk", None)  # what import_optional meets uninstalled
    (tmp_path / "repo").mkdir()
    with pytest.raises(MissingDependencyError) as info:
        fsdask.open_dataset(f"icechunk://{tmp_path}/repo")
    msg = str(info.value)
    assert "\n" not in msg and "pip install 'fsdask[icechunk]'" in msg and "Icechunk" in msg
    from fsdask.cli import main

    assert main(["info", f"icechunk://{tmp_path}/repo"]) == 2


# ------------------------------------------------------------------------------ read and write
def test_read_pins_a_snapshot_and_results_record_it(tmp_path):
    X, y = _data()
    data = f"icechunk://{tmp_path}/in"
    fsdask.ingest(X, data, y=y)
    repo = _repo(tmp_path / "in")
    snap = repo.lookup_branch("main")
    assert _messages(repo)[0].startswith("fsdask ingest: dataset /")

    ds = fsdask.open_dataset(data)
    assert ds.attrs["icechunk"] == {
        "repository": f"icechunk://{tmp_path}/in",
        "branch": "main",
        "snapshot": snap,
    }
    np.testing.assert_array_equal(ds["X"].values, X)

    out = f"icechunk://{tmp_path}/out?group=ttest"
    select(data, method="ttest", output=out, progress=False, stdout=io.StringIO())
    res = fsdask.open_result(out)
    assert res.attrs["input_icechunk"]["snapshot"] == snap
    assert res.attrs["input_icechunk"]["branch"] == "main"
    message = _messages(_repo(tmp_path / "out"))[0]
    assert message.startswith("fsdask select: result ttest from") and snap in message

    # a commit on the input is a new snapshot; the old one still reads the old data
    fsdask.ingest(X + 1, data, y=y, overwrite=True)
    assert repo.lookup_branch("main") != snap
    old = fsdask.open_dataset(f"{data}?snapshot={snap}")
    np.testing.assert_array_equal(old["X"].values, X)
    np.testing.assert_array_equal(fsdask.open_dataset(data)["X"].values, X + 1)


def test_outputs_follow_the_never_destroy_rule(tmp_path):
    X, y = _data()
    data = f"icechunk://{tmp_path}/in"
    fsdask.ingest(X, data, y=y)
    out = f"icechunk://{tmp_path}/out?group=ttest"
    kw = {"method": "ttest", "progress": False, "stdout": io.StringIO()}
    select(data, output=out, **kw)
    repo = _repo(tmp_path / "out")
    tip = repo.lookup_branch("main")
    with pytest.raises(StoreError, match="already exists"):
        select(data, output=out, **kw)
    with pytest.raises(StoreError, match="not a dataset"):
        fsdask.ingest(X, out, y=y, overwrite=True)
    with pytest.raises(StoreError, match="destroy the input"):
        select(data, output=f"{data}&group=x" if "?" in data else f"{data}?group=x", **kw)
    with pytest.raises(ParameterError, match="committed to a branch"):
        select(data, output=f"icechunk://{tmp_path}/out?tag=t&group=z", **kw)
    (tmp_path / "theirs").mkdir()
    (tmp_path / "theirs" / "notes.txt").write_text("mine")
    with pytest.raises(StoreError, match="not an Icechunk repository"):
        select(data, output=f"icechunk://{tmp_path}/theirs", overwrite=True, **kw)
    assert os.listdir(tmp_path / "theirs") == ["notes.txt"]
    assert repo.lookup_branch("main") == tip  # nothing committed by the refusals
    select(data, output=out, overwrite=True, **kw)
    assert len(_messages(repo)) == 3  # a new commit; the first result stays in the history
    old = fsdask.open_result(f"icechunk://{tmp_path}/out?group=ttest&snapshot={tip}")
    np.testing.assert_array_equal(old["weight"].values, fsdask.open_result(out)["weight"].values)


# ------------------------------------------------------------------------------ pipelines
PIPELINE = """\
steps:
  - name: ttest
    select: {{url: "{data}", method: ttest, output: "{out}?group=ttest",
             param: {{n_features_to_select: 5}}, no_progress: true}}
  - name: fisher
    select: {{url: "{data2}", method: fisher, output: "{out}?group=fisher", no_progress: true}}
"""


def _pipeline(tmp_path, name="pipe.yaml", data2=None, out=None):
    data = f"icechunk://{tmp_path}/in"
    cfg = tmp_path / name
    out = out or f"icechunk://{tmp_path}/out"
    cfg.write_text(PIPELINE.format(data=data, data2=data2 or data, out=out))
    return cfg, data, out


def _run(cfg, **kw):
    out = io.StringIO()
    try:
        return run_pipeline(cfg, out=out, **kw)
    finally:
        print(out.getvalue()[:3000])


def test_nightly_runs_rerun_on_a_commit_skip_unchanged_and_repeat_as_of(tmp_path):
    cfg, data, out = _pipeline(tmp_path)
    X, y = _data()
    fsdask.ingest(X, data, y=y)
    s1 = _repo(tmp_path / "in").lookup_branch("main")
    assert _run(cfg) == {"ttest": "ran", "fisher": "ran"}
    out_repo = _repo(tmp_path / "out")
    assert len(_messages(out_repo)) == 2  # both outputs: one commit
    assert _messages(out_repo)[0].startswith("fsdask run pipe.yaml: fsdask select: result ttest")
    night1 = fsdask.open_result(f"{out}?group=ttest")
    assert _run(cfg) == {"ttest": "skipped", "fisher": "skipped"}
    assert len(_messages(out_repo)) == 2  # nothing to commit

    fsdask.ingest(_data(1, shift=10)[0], data, y=y, overwrite=True)  # a commit on the input
    s2 = _repo(tmp_path / "in").lookup_branch("main")
    assert _run(cfg) == {"ttest": "ran", "fisher": "ran"}
    night2 = fsdask.open_result(f"{out}?group=ttest")
    assert not np.array_equal(night2["weight"].values, night1["weight"].values)

    _repo(tmp_path / "in").create_tag("night-1", s1)
    # as of night 1: by snapshot id it runs again; by the tag of that snapshot it is done
    for version, done in ((s1, "ran"), ("night-1", "skipped")):
        assert _run(cfg, as_of=version) == {"ttest": done, "fisher": done}
        again = fsdask.open_result(f"{out}?group=ttest")
        np.testing.assert_array_equal(again["weight"].values, night1["weight"].values)
        np.testing.assert_array_equal(again["rank"].values, night1["rank"].values)
        assert again.attrs["input_icechunk"]["snapshot"] == s1
    from fsdask.cli import main

    assert main(["run", str(cfg), "--as-of", "night-1"]) == 0  # the command line: the same
    assert _run(cfg) == {"ttest": "ran", "fisher": "ran"}  # tonight again: the branch tip
    with pytest.raises(StoreError, match="no snapshot NOPE"):
        _run(cfg, as_of="NOPE")

    state = str(cfg).replace(".yaml", ".state.json")
    records = read_history(history_path(state))
    snaps = [next(iter(r["inputs"].values()))["snapshot"] for r in records if r["step"] == "ttest"]
    assert snaps == [s1, s1, s2, s1, s1, s1, s2]  # every night kept, each with its snapshot
    assert s1 in table(records) and s2 in table(records)

    events = read_lineage(lineage_path(state))
    assert [e["eventType"] for e in events] == ["START", "COMPLETE"] * 7
    done = events[1]
    assert done["run"]["runId"] == events[0]["run"]["runId"]
    assert done["inputs"][0]["namespace"] == f"icechunk://{tmp_path}/in"
    assert done["inputs"][0]["facets"]["version"]["datasetVersion"] == s1
    written = {o["name"]: o["facets"]["version"]["datasetVersion"] for o in done["outputs"]}
    assert set(written) == {"ttest", "fisher"} and written["ttest"] == _messages_id(out_repo, -2)
    assert done["run"]["facets"]["processing_engine"]["name"] == "fsdask"
    assert done["run"]["facets"]["fsdask"]["steps"]["ttest"]["options"]["method"] == "ttest"


def _messages_id(repo, index: int) -> str:
    return [s.id for s in repo.ancestry(branch="main")][index]


def test_a_failing_second_step_commits_nothing(tmp_path):
    cfg, data, out = _pipeline(tmp_path, data2=f"icechunk://{tmp_path}/in?group=missing")
    X, y = _data()
    fsdask.ingest(X, data, y=y)
    fsdask.ingest(X, f"{out}?group=earlier", y=y)  # the output branch has a history already
    tip = _repo(tmp_path / "out").lookup_branch("main")
    with pytest.raises(fsdask.pipeline.StepFailed, match="step 2 \\(fisher\\)") as info:
        _run(cfg)
    assert exit_code(info.value) == 2
    assert _repo(tmp_path / "out").lookup_branch("main") == tip
    assert not Location.of(f"{out}?group=ttest").exists()
    state = json.loads((tmp_path / "pipe.state.json").read_text())
    assert "ttest" not in state["steps"]  # its output was never committed: it runs again
    events = read_lineage(lineage_path(str(tmp_path / "pipe.state.json")))
    assert [e["eventType"] for e in events] == ["START", "FAIL"]
    assert "fisher" in events[1]["run"]["facets"]["errorMessage"]["message"]


CHAIN = """\
steps:
  - name: ingest
    ingest: {source: d.npz, url: "icechunk://out?group=data"}
  - name: ttest
    select: {url: "icechunk://out?group=data", method: ttest, output: "icechunk://out?group=ttest",
             no_progress: true}
  - name: eval
    evaluate: {data: "icechunk://out?group=data", result: "icechunk://out?group=ttest",
               output: "icechunk://out?group=eval", classifier: knn, max_features: 4, folds: 3}
"""


def test_ingest_select_evaluate_into_one_commit(tmp_path):
    X, y = _data()
    np.savez(tmp_path / "d.npz", X=X, y=y)
    (tmp_path / "chain.yaml").write_text(CHAIN)
    assert set(_run(tmp_path / "chain.yaml").values()) == {"ran"}
    repo = _repo(tmp_path / "out")
    messages = _messages(repo)
    assert len(messages) == 2  # the steps read each other's outputs before the one commit
    assert "fsdask ingest: dataset data from d.npz" in messages[0]
    assert "fsdask evaluate: evaluation eval from" in messages[0] and "@ this run" in messages[0]
    from fsdask.evaluate import open_evaluation

    ev = open_evaluation(f"icechunk://{tmp_path}/out?group=eval")
    assert len(ev.curve) == 4 and np.isnan(ev.stability["jaccard"])  # a NaN attribute kept
    assert set(_run(tmp_path / "chain.yaml").values()) == {"skipped"}
    state = json.loads((tmp_path / "chain.state.json").read_text())
    read = state["steps"]["eval"]["inputs"]["icechunk://out?group=ttest"]["snapshot"]
    assert read == repo.lookup_branch("main")  # the run's own commit, not a placeholder
    records = read_history(history_path(str(tmp_path / "chain.state.json")))
    assert {
        fp["snapshot"] for r in records for fp in r["inputs"].values() if fp.get("snapshot")
    } == {read}


@pytest.mark.cluster
@pytest.mark.infra
def test_workers_of_a_cluster_read_this_runs_uncommitted_output(tmp_path, cluster):
    X, y = _data()
    np.savez(tmp_path / "d.npz", X=X, y=y)
    address = cluster.scheduler.address
    config = CHAIN.split("  - name: eval")[0].replace(
        "no_progress: true}", f"no_progress: true, scheduler: '{address}'}}"
    )
    (tmp_path / "chain.yaml").write_text(config)
    assert _run(tmp_path / "chain.yaml") == {"ingest": "ran", "ttest": "ran"}
    reference = fsdask.Filter("ttest").fit(X, y).result_
    res = fsdask.open_result(f"icechunk://{tmp_path}/out?group=ttest")
    np.testing.assert_allclose(res["weight"].values, reference["weight"].values, rtol=1e-6)


def test_no_step_may_write_the_lineage_file(tmp_path):
    (tmp_path / "p.yaml").write_text(
        "steps:\n  - select: {url: d.zarr, method: ttest, output: r.zarr, "
        "csv: p.state.lineage.jsonl}\n"
    )
    with pytest.raises(ParameterError, match="where the run keeps its lineage file"):
        _run(tmp_path / "p.yaml")
    assert not (tmp_path / "p.state.lineage.jsonl").exists()


class _Then(io.StringIO):
    """Standard output that runs ``then()`` once when ``marker`` is printed."""

    def __init__(self, marker, then):
        super().__init__()
        self.marker, self.then = marker, then

    def write(self, text):
        if self.then is not None and self.marker in text:
            then, self.then = self.then, None
            then()
        return super().write(text)


def test_two_runs_committing_to_one_branch_one_fails_with_one_line(tmp_path):
    cfg_a, data, out = _pipeline(tmp_path, name="a.yaml")
    cfg_b = tmp_path / "b.yaml"
    cfg_b.write_text(
        PIPELINE.replace("{out}?group=", "{out}?group=b-").format(data=data, data2=data, out=out)
    )
    X, y = _data()
    fsdask.ingest(X, data, y=y)
    # run b completes while run a is between its two steps (a has written its first output)
    stdout = _Then("[2/2] fisher: runs", lambda: _run(cfg_b))
    with pytest.raises(StoreError) as info:
        run_pipeline(cfg_a, out=stdout)
    msg = str(info.value)
    assert "another writer committed to branch main" in msg and "\n" not in msg
    assert exit_code(info.value) == 2
    repo = _repo(tmp_path / "out")
    assert _messages(repo)[0].startswith("fsdask run b.yaml")  # b's commit stands
    assert not Location.of(f"{out}?group=ttest").exists()
    assert Location.of(f"{out}?group=b-ttest").exists()
    assert _run(cfg_a) == {"ttest": "ran", "fisher": "ran"}  # a runs again, whole


# ------------------------------------------------------------------------------ S3 and faults
RETRIES = {"config_kwargs": {"retries": {"max_attempts": 12, "mode": "standard"}}}


@pytest.mark.s3
@pytest.mark.infra
def test_s3_twenty_percent_faults_give_the_fault_free_result(s3, s3_endpoint):
    from faultproxy import FaultProxy

    bucket, opts = s3
    data = f"icechunk+s3://{bucket.removeprefix('s3://')}/in"
    X, y = _data()
    fsdask.ingest(X, data, y=y, storage_options=opts)
    kw = {"method": "ttest", "progress": False, "stdout": io.StringIO()}
    select(data, output=f"{data.replace('/in', '/ref')}", storage_options=opts, **kw)
    reference = fsdask.open_result(data.replace("/in", "/ref"), storage_options=opts)
    out = data.replace("/in", "/out")
    with FaultProxy(s3_endpoint, rate=0.2, seed=3) as proxy:
        faulty = {**opts, "endpoint_url": proxy.url, **RETRIES}
        select(data, output=out, storage_options=faulty, **kw)
        back = fsdask.open_result(out, storage_options=faulty)
    assert sum(proxy.counts[f] for f in ("503", "reset", "truncate", "latency")) >= 3, proxy.counts
    np.testing.assert_array_equal(back["weight"].values, reference["weight"].values)
    np.testing.assert_array_equal(back["selected"].values, reference["selected"].values)
    snap = _repo(IcechunkRef.parse(data), opts).lookup_branch("main")
    assert back.attrs["input_icechunk"]["snapshot"] == snap


@pytest.mark.s3
@pytest.mark.infra
@pytest.mark.slow  # Icechunk's S3 client retries each request with backoff before it gives up
def test_s3_all_requests_failing_exit_2_and_the_branch_unchanged(s3, s3_endpoint):
    from faultproxy import FaultProxy

    bucket, opts = s3
    data = f"icechunk+s3://{bucket.removeprefix('s3://')}/in"
    out = f"icechunk+s3://{bucket.removeprefix('s3://')}/out?group=ttest"
    X, y = _data()
    fsdask.ingest(X, data, y=y, storage_options=opts)
    fsdask.ingest(X, f"{out.split('?')[0]}?group=earlier", y=y, storage_options=opts)
    out_ref = IcechunkRef.parse(out)
    tip = _repo(out_ref, opts).lookup_branch("main")
    with FaultProxy(s3_endpoint, rate=1.0, faults=("503", "reset"), seed=4) as proxy:
        args = [sys.executable, "-m", "fsdask.cli", "select", data, "--method", "ttest"]
        args += ["-o", out, "--no-progress", "--storage-option", f"endpoint_url={proxy.url}"]
        args += ["--storage-option", "config_kwargs={retries: {max_attempts: 2}}"]
        r = subprocess.run(args, capture_output=True, text=True, timeout=180)
    assert r.returncode == 2, r.stderr[-2000:]
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and data in lines[0], r.stderr[-2000:]
    assert _repo(out_ref, opts).lookup_branch("main") == tip
