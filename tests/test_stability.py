"""Stability selection (issue 41 item 1): the subsamples, the frequencies, the bound, one
pass for a filter's resamples, refits as tasks, the same result on threads, on a 2-process
cluster and after a worker is killed, and scikit-learn compatibility."""

import logging
import os
import signal
import threading
import time
import warnings

import dask
import dask.array as da
import numpy as np
import pytest
from clusters import two_workers
from sklearn.pipeline import Pipeline
from sklearn.svm import LinearSVC
from sklearn.utils.estimator_checks import check_estimator

import fsdask
from fsdask.cluster import scheduler
from fsdask.datasets import weston_linear
from fsdask.errors import InputError, ParameterError
from fsdask.stability import Stability, draw_subsamples, error_bound, stability_path
from fsdask.testing import expected_failed_checks


class CountingArray:
    """An array whose reads are counted, standing in for a Zarr store."""

    def __init__(self, a):
        self.a, self.shape, self.dtype, self.ndim = a, a.shape, a.dtype, a.ndim
        self.reads = 0
        self.lock = threading.Lock()

    def __getitem__(self, key):
        with self.lock:
            self.reads += 1
        return self.a[key]


def _planted(seed=0, n=40, p=60, shift=2.0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, p))
    y = np.repeat([0, 1], n // 2)
    X[y == 1, :4] += shift
    return X, y


def test_complementary_pairs_split_each_class_in_halves():
    y = np.array([0] * 9 + [1] * 7)
    subs = draw_subsamples(16, 6, strata=y, random_state=3)
    for a, b in zip(subs[::2], subs[1::2]):
        assert np.intersect1d(a, b).size == 0 and np.union1d(a, b).size == 16
        assert (y[a] == 0).sum() == 4 and (y[a] == 1).sum() == 3
    again = draw_subsamples(16, 6, strata=y, random_state=3)
    assert all(np.array_equal(s, t) for s, t in zip(subs, again))
    with pytest.raises(ParameterError, match="must be even"):
        draw_subsamples(16, 5)
    with pytest.raises(ParameterError, match="must be 0.5"):
        draw_subsamples(16, 4, sample_fraction=0.3)
    assert len(draw_subsamples(16, 5, sample_fraction=0.3, complementary_pairs=False)) == 5


def test_bound_and_path():
    assert error_bound(10, 1000, 0.75) == pytest.approx(100 / (0.5 * 1000))
    assert error_bound(10, 1000, 0.5) == np.inf
    assert list(stability_path(np.array([0.1, 0.5, 0.9, 1.0]), np.array([0.0, 0.5, 0.95]))) == [
        4,
        3,
        1,
    ]


def test_filter_frequencies_are_those_of_refits_on_the_subsamples():
    X, y = _planted()
    st = Stability(fsdask.Filter("ttest", n_features_to_select=4), n_resamples=10).fit(X, y)
    subs = draw_subsamples(40, 10, strata=y, random_state=0)
    refits = [fsdask.Filter("ttest", n_features_to_select=4).fit(X[r], y[r]).support_ for r in subs]
    np.testing.assert_array_equal(st.frequency_, np.mean(refits, 0))
    plain = fsdask.Filter("ttest", n_features_to_select=4).fit(X, y)
    # the resample kernel is the feature-block one; Filter streams shifted sums: rounding apart
    np.testing.assert_allclose(st.result_["plain_weight"].values, plain.scores_, rtol=1e-12)
    np.testing.assert_array_equal(st.result_["plain_selected"].values, plain.support_)
    np.testing.assert_array_equal(st.support_, st.frequency_ >= 0.6)
    res = st.result_
    assert {"stability", "stability_low", "stability_high", "stability_path"} <= set(res)
    assert (res["stability_low"] <= res["stability"]).all()
    assert (res["stability"] <= res["stability_high"]).all()
    assert res.attrs["error_bound"] == pytest.approx(st.error_bound_)
    assert st.mean_selected_ == 4 and st.error_bound_ == pytest.approx(16 / (0.2 * 60))
    assert set(np.flatnonzero(st.support_)) == {0, 1, 2, 3}


@pytest.mark.parametrize("statistic", ["fold_change", "pearson", "ks"])
def test_other_filters_match_their_refits(statistic):
    X, y = _planted(1)
    X = np.abs(X) + 1.0  # fold change on positive data (log_scale auto: False)
    if statistic == "pearson":
        y = X[:, 0] + np.random.default_rng(0).normal(size=40)
    st = Stability(fsdask.Filter(statistic, n_features_to_select=5), n_resamples=6).fit(X, y)
    strata = None if statistic == "pearson" else y
    subs = draw_subsamples(40, 6, strata=strata, random_state=0)
    refits = [
        fsdask.Filter(statistic, n_features_to_select=5).fit(X[r], y[r]).support_ for r in subs
    ]
    np.testing.assert_array_equal(st.frequency_, np.mean(refits, 0))


def test_one_pass_for_100_resamples_of_a_filter():
    X, y = _planted(2, p=50)
    X[:, 7] = 1.0  # a constant feature, screened in the same pass
    src = CountingArray(X)
    Xd = da.from_array(src, chunks=(40, 10), asarray=False, fancy=False, meta=np.empty((0, 0)))
    with dask.config.set(scheduler="threads"):
        st = Stability(fsdask.Filter("ttest", n_features_to_select=5), n_resamples=100).fit(Xd, y)
    assert src.reads == 5, f"{src.reads} chunk reads for 5 chunks"
    assert st.n_passes_ == 1
    assert st.frequency_[7] == 0 and st.ranking_[7] == 50


def test_planted_features_reach_the_stable_set_and_false_ones_stay_within_the_bound():
    false = []
    for seed in range(5):
        syn = weston_linear(n_samples=60, n_features=200, random_state=seed)
        st = Stability(
            fsdask.Filter("ttest", n_features_to_select=10), n_resamples=40, random_state=seed
        ).fit(syn.X.values, syn.y)
        assert set(syn.relevant[1:3]) <= set(np.flatnonzero(st.support_))
        false.append(np.sum(~np.isin(np.flatnonzero(st.support_), syn.relevant)))
    assert np.mean(false) <= st.error_bound_


@pytest.mark.slow
def test_false_selections_within_the_bound_over_50_seeds():
    false, found = [], []
    for seed in range(50):
        syn = weston_linear(n_samples=60, n_features=200, random_state=100 + seed)
        st = Stability(
            fsdask.Filter("ttest", n_features_to_select=10), n_resamples=50, random_state=seed
        ).fit(syn.X.values, syn.y)
        sel = np.flatnonzero(st.support_)
        false.append(np.sum(~np.isin(sel, syn.relevant)))
        found.append(np.isin(syn.relevant[1:3], sel).mean())
    se = np.std(false) / np.sqrt(len(false))
    assert np.mean(false) <= st.error_bound_ + 2 * se
    assert np.mean(found) >= 0.9  # the strongest planted features are stable


def test_refits_of_an_iterative_method_as_tasks():
    X, y = _planted(3, p=30)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        st = Stability(fsdask.Logo(max_iter=3, n_features_to_select=4), n_resamples=6).fit(X, y)
    subs = draw_subsamples(40, 6, strata=y, random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        refits = [
            fsdask.Logo(max_iter=3, n_features_to_select=4).fit(X[r], y[r]).support_ for r in subs
        ]
    np.testing.assert_array_equal(st.frequency_, np.mean(refits, 0))
    assert set(np.flatnonzero(st.support_)) >= {0, 1}


def test_refit_warnings_are_said_once():
    X, y = _planted(3, p=20)
    with pytest.warns(UserWarning, match=r"of 5 refits warned") as rec:
        Stability(fsdask.Logo(max_iter=1, n_features_to_select=3), n_resamples=4).fit(X, y)
    assert sum("refits warned" in str(w.message) for w in rec) == 1
    assert [str(w.message) for w in rec if "refits warned" not in str(w.message)] == []


def test_subsample_of_a_too_small_class_is_refused():
    X, y = _planted(0, n=8, p=5)
    with pytest.raises(InputError, match="needs at least 2 per subsample and class"):
        Stability(fsdask.Filter("ttest"), n_resamples=4).fit(X, np.array([0] * 5 + [1] * 3))


@pytest.mark.parametrize("statistic", ["ttest", "ks"])
def test_scores_above_the_budget_are_refitted_and_said(statistic, caplog):
    """At the default k (half the features) every resample's scores of a filter reach the
    client; above the memory budget the resamples are refitted instead — the log line says
    so and names the remedy — with the selections of the one-pass route."""
    X, y = _planted(2)
    est = fsdask.Filter(statistic)
    one = Stability(est, n_resamples=8, random_state=3).fit(X, y)
    assert 16 * 9 * X.shape[1] > 4000  # the premise: 9 score rows of p, twice, above 4 kB
    with dask.config.set({"fsdask.memory-budget": "4kB"}), caplog.at_level(logging.INFO, "fsdask"):
        refit = Stability(est, n_resamples=8, random_state=3).fit(X, y)
    said = [r.getMessage() for r in caplog.records if "refitting each of the 9" in r.getMessage()]
    assert len(said) == 1 and "n_features_to_select=K" in said[0]
    assert "need 8.44 kiB on the client, above the memory budget of 3.91 kiB" in said[0]
    assert one.n_passes_ == 1 and refit.n_passes_ > 9
    # one after another on the client (a resample's rows are above the budget too): each
    # refit says how many are done, the last without a time left
    done = [r.getMessage() for r in caplog.records if ": refit " in r.getMessage()]
    assert [m.split(" done")[0] for m in done] == [
        f"stability({statistic}): refit {i} of 9" for i in range(1, 10)
    ]
    assert "more" in done[0] and "more" not in done[-1]
    np.testing.assert_array_equal(one.frequency_, refit.frequency_)
    np.testing.assert_array_equal(one.support_, refit.support_)


def test_check_estimator_and_pipeline():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        est = Stability(fsdask.Filter("f"), n_resamples=10)
        check_estimator(est, expected_failed_checks=expected_failed_checks(est))
    X, y = _planted()
    pipe = Pipeline(
        [
            ("stable", Stability(fsdask.Filter("ttest", n_features_to_select=4), n_resamples=10)),
            ("svm", LinearSVC()),
        ]
    )
    assert pipe.fit(X, y).score(X, y) > 0.8
    assert pipe[0].get_support().sum() == 4


@pytest.fixture(scope="module")
def ds(tmp_path_factory):
    X, y = _planted(4, n=40, p=120)
    path = tmp_path_factory.mktemp("stab") / "x.zarr"
    fsdask.ingest(X.astype(np.float32), path, y=y, chunk_bytes=40 * 4 * 30)
    return fsdask.open_dataset(path)


def _logo_stability():
    return Stability(fsdask.Logo(max_iter=3, n_features_to_select=4), n_resamples=8, random_state=7)


def _ttest_stability():
    return Stability(fsdask.Filter("ttest", n_features_to_select=4), n_resamples=20, random_state=7)


@pytest.mark.cluster
@pytest.mark.parametrize("make", [_ttest_stability, _logo_stability], ids=["ttest", "logo"])
def test_same_result_on_threads_and_a_2_process_cluster(cluster, ds, make):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ref = make().fit(ds).result_
        with scheduler(cluster.scheduler.address):
            res = make().fit(ds).result_
    np.testing.assert_array_equal(res["stability"].values, ref["stability"].values)
    np.testing.assert_array_equal(res["selected"].values, ref["selected"].values)
    np.testing.assert_allclose(res["plain_weight"].values, ref["plain_weight"].values, rtol=1e-9)


@pytest.fixture
def lc():
    """A cluster of its own: a worker of it is killed."""
    with two_workers("1GB") as client:
        yield client


def _tasks_done(client) -> int:
    return client.run_on_scheduler(
        lambda dask_scheduler: sum(ts.state == "memory" for ts in dask_scheduler.tasks.values())
    )


@pytest.mark.cluster
@pytest.mark.infra
@pytest.mark.slow
def test_same_result_with_a_worker_killed_mid_run(lc, ds):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ref = _logo_stability().fit(ds).result_
    victim = sorted(lc.run(os.getpid).values())[0]
    out: dict = {}

    def fit():
        try:
            with warnings.catch_warnings(), scheduler(lc.scheduler.address):
                warnings.simplefilter("ignore")
                out["result"] = _logo_stability().fit(ds).result_
        except BaseException as exc:  # surfaced below
            out["error"] = exc

    before = _tasks_done(lc)
    thread = threading.Thread(target=fit)
    thread.start()
    deadline = time.monotonic() + 60
    while _tasks_done(lc) <= before + 2 and thread.is_alive() and time.monotonic() < deadline:
        time.sleep(0.02)
    mid_run = thread.is_alive()
    os.kill(victim, signal.SIGKILL)
    thread.join(timeout=300)
    assert not thread.is_alive()
    if "error" in out:
        raise out["error"]
    assert mid_run, "the fit finished before the worker was killed"
    res = out["result"]
    np.testing.assert_array_equal(res["stability"].values, ref["stability"].values)
    np.testing.assert_array_equal(res["selected"].values, ref["selected"].values)


def test_select_command_with_stability_and_fdr(tmp_path, capsys):
    from fsdask.cli import main

    X, y = _planted(5, p=50)
    url = str(tmp_path / "d.zarr")
    fsdask.ingest(X.astype(np.float32), url, y=y)
    base = ["select", url, "--method", "ttest", "--no-progress", "--top", "3"]
    out = str(tmp_path / "s.zarr")
    assert main([*base, "--param", "n_features_to_select=4", "--stability", "20", "-o", out]) == 0
    assert "stable set: 4 feature(s) selected in >= 0.6 of 20 subsamples" in capsys.readouterr().out
    res = fsdask.open_result(out)
    assert {"stability", "stability_low", "plain_selected"} <= set(res)
    assert res.attrs["error_bound"] == pytest.approx(16 / (0.2 * 50))
    out = str(tmp_path / "f.zarr")
    assert main([*base, "--fdr", "0.05", "--fdr-method", "by", "-o", out]) == 0
    assert "selected at FDR 0.05 (BY)" in capsys.readouterr().out
    assert "pvalue_adj" in fsdask.open_result(out)
    for bad in (["--fdr", "1.5"], ["--permutations", "10"], ["--stability", "1"]):
        assert main([*base, *bad, "-o", str(tmp_path / "bad.zarr")]) == 2
        assert not (tmp_path / "bad.zarr").exists()
    assert "--fdr 1.5: a false discovery rate in (0, 1)" in capsys.readouterr().err


def test_sample_blocked_input_and_one_vs_rest_groups():
    X, y = _planted(6, p=30)
    Xs = da.from_array(X, chunks=(10, 30))
    a = Stability(fsdask.Filter("ttest", n_features_to_select=4), n_resamples=10).fit(Xs, y)
    b = Stability(fsdask.Filter("ttest", n_features_to_select=4), n_resamples=10).fit(X, y)
    np.testing.assert_array_equal(a.frequency_, b.frequency_)
    y3 = np.arange(40) % 3
    g = Stability(fsdask.Filter("ttest", groups="all", n_features_to_select=2), n_resamples=4)
    assert g.fit(X, y3).frequency_.shape == (30,)  # refits: each a one-vs-rest fit


@pytest.mark.parametrize("route", ["tasks", "client"])
def test_the_tally_of_refits_is_what_their_whole_results_give(route):
    """Counted where the refits run (or folded one by one on the client), the tally is what
    the R + 1 whole results give: the first refit, how often the others selected each
    feature and scored it at least as high, and the refits' first warnings in order."""
    from fsdask.fitting import FitContext
    from fsdask.stability.refit import COUNT_GROUP, MERGE_GROUP, refit_all, refit_tally

    X, y = _planted(5, p=25)
    est = fsdask.Logo(max_iter=2, n_features_to_select=4)
    rng = np.random.default_rng(0)
    R = COUNT_GROUP * MERGE_GROUP + 3  # two levels of merges, a short last group
    resamples = [(None, y)] + [(r, y[r]) for r in (rng.permutation(40)[:20] for _ in range(R))]
    seeds = np.arange(R + 1)
    budget = 10**9 if route == "tasks" else 1  # a resample's rows fit a task, or not

    def ctx():
        return FitContext(est, memory_budget=budget).bind(X, y)

    with warnings.catch_warnings(record=True) as whole_said:
        warnings.simplefilter("always")
        support, scores = refit_all(ctx(), est, da.from_array(X), y, resamples, seeds)
    with warnings.catch_warnings(record=True) as tally_said:
        warnings.simplefilter("always")
        t = refit_tally(ctx(), est, da.from_array(X), y, resamples, seeds)
    np.testing.assert_array_equal(t.support, support[0])
    np.testing.assert_array_equal(t.scores, scores[0])
    np.testing.assert_array_equal(t.selected, support[1:].sum(0))
    np.testing.assert_array_equal(t.exceeded, (scores[1:] >= scores[0]).sum(0))
    assert t.n_refits == R and t.n_selected == int(support[1:].sum())
    assert [str(w.message) for w in tally_said] == [str(w.message) for w in whole_said]
    assert any("refits warned" in str(w.message) for w in tally_said)


def test_no_task_of_the_tally_holds_more_than_a_group_of_refits():
    """R results of size p never meet in one task: each counting task reads its group and
    the first refit, each merge at most MERGE_GROUP partial tallies."""
    from fsdask.stability.refit import COUNT_GROUP, MERGE_GROUP, _tally_tree

    tasks = [dask.delayed(lambda i: i, pure=True)(i) for i in range(100)]
    graph = dict(_tally_tree(tasks).__dask_graph__())
    refits = {t.key for t in tasks}
    widest = 0
    for key, task in graph.items():
        if key in refits:
            continue
        deps = {d for d in getattr(task, "dependencies", ()) if d in graph}
        widest = max(widest, len(deps))
        assert len(deps & refits) <= COUNT_GROUP + 1, (key, deps)
    assert 1 < widest <= max(COUNT_GROUP + 1, MERGE_GROUP)
