"""PCA-based baselines (Jolliffe I/NI, PFA, SPCA) against dense numpy references."""

import dask.array as da
import numpy as np
import pytest

import fsdask
from fsdask.testing import SelectorChecks


@pytest.fixture
def X(rng):
    return rng.normal(size=(40, 12)) @ rng.normal(size=(12, 12)) + 0.3 * rng.normal(size=(40, 12))


def _pcs(X):
    Xc = X - X.mean(0)
    _, s, Vt = np.linalg.svd(Xc, full_matrices=False)
    return s, Vt.T


def test_jolliffe_ni_matches_numpy(X):
    q = 5
    e = fsdask.JolliffeNI(n_features_to_select=q).fit(da.from_array(X, chunks=(40, 5)))
    _, V = _pcs(X)
    picked = []
    for k in range(q):
        order = np.argsort(-np.abs(V[:, k]))
        picked.append(next(j for j in order if j not in picked))
    assert set(e.get_support(indices=True)) == set(picked)
    assert list(np.argsort(e.ranking_)[:q]) == picked


def test_jolliffe_i_matches_numpy(X):
    q = 6
    e = fsdask.JolliffeI(n_features_to_select=q).fit(X)
    picked, rest = [], list(range(X.shape[1]))
    for _ in range(q):
        _, V = _pcs(X[:, rest])
        j = rest[int(np.argmax(np.abs(V[:, 0])))]
        picked.append(j)
        rest.remove(j)
    assert e.result_.attrs["pick_order"] == picked
    assert set(e.get_support(indices=True)) == set(picked)


def test_pfa_one_feature_per_cluster_and_seeded(X):
    a = fsdask.PFA(n_features_to_select=4, random_state=3).fit(X)
    b = fsdask.PFA(n_features_to_select=4, random_state=3).fit(X)
    assert a.support_.sum() == 4
    np.testing.assert_array_equal(a.support_, b.support_)
    # duplicated features have identical loadings → same cluster → at most one of them is kept
    Xd = np.column_stack([X, X[:, 0], X[:, 0]])
    c = fsdask.PFA(n_features_to_select=3, n_components=2).fit(Xd)
    assert c.support_[[0, 12, 13]].sum() <= 1


def test_spca_selects_q_nonzero_loadings(X):
    e = fsdask.SparsePCASelector(n_features_to_select=3).fit(X)
    assert e.support_.sum() == 3
    assert e.result_.attrs["nnz"] >= 3
    assert fsdask.get_method("spca", n_features_to_select=2).fit(X).support_.sum() == 2


def test_cpfs_beats_or_ties_jolliffe_i_on_reconstruction(X):
    from fsdask.evaluate import reconstruction_error

    for q in (3, 6):
        c = fsdask.CPFS(n_features_to_select=q).fit(X)
        j = fsdask.JolliffeI(n_features_to_select=q).fit(X)
        assert (
            reconstruction_error(X, c.get_support(indices=True))
            <= reconstruction_error(X, j.get_support(indices=True)) + 0.05
        )


class _PCAChecks(SelectorChecks):
    cluster_exact = False  # the Gram / eigh run in threaded BLAS on the driver

    cls = "JolliffeI"

    def make_estimator(self, **params):
        return getattr(fsdask, self.cls)(**{"n_features_to_select": 3, **params})


class TestJolliffeI(_PCAChecks):
    cls = "JolliffeI"


class TestJolliffeNI(_PCAChecks):
    cls = "JolliffeNI"


class TestPFA(_PCAChecks):
    cls = "PFA"


class TestSparsePCASelector(_PCAChecks):
    cls = "SparsePCASelector"

    def make_estimator(self, **params):
        return fsdask.SparsePCASelector(**{"n_features_to_select": 3, "max_bisect": 8, **params})


def test_jolliffe_i_shows_each_pick_with_the_time_left():
    import io

    from fsdask.fitting import progress_lines

    X = np.random.default_rng(0).normal(size=(30, 20))
    out = io.StringIO()
    with progress_lines(stream=out, every=0):
        e = fsdask.JolliffeI(n_features_to_select=5).fit(X)
    lines = [ln for ln in out.getvalue().splitlines() if "jolliffe_i: iteration" in ln]
    assert len(lines) == 5, out.getvalue()
    for k, (line, j) in enumerate(zip(lines, e.result_.attrs["pick_order"]), start=1):
        assert f"iteration {k}: feature={j}, loading=" in line, line
    assert "more to n_features_to_select=5" in lines[0] and "more to" not in lines[-1]


@pytest.mark.parametrize("shape", [(40, 300), (300, 40)], ids=["p>n", "p<n"])
def test_jolliffe_i_starts_from_the_singular_values_not_bbt(shape, monkeypatch):
    """B = S Vᵀ has orthogonal rows, so K = BBᵀ = S²: the fit hands its factor's s to the
    picks, which then never form the r²p product BBᵀ, and pick what BBᵀ picks."""
    from fsdask.linalg import gram_factor
    from fsdask.methods import pca_based

    X = np.random.default_rng(3).normal(size=shape) @ np.diag(np.linspace(0.5, 3, shape[1]))
    B, s = gram_factor(X - X.mean(0))
    ref, ref_last = pca_based.jolliffe_i_picks(B, 12)
    seen = []
    picks = pca_based.jolliffe_i_picks

    def spy(B, q, ctx=None, s=None):
        seen.append(s)
        return picks(B, q, ctx, s=s)

    monkeypatch.setattr(pca_based, "jolliffe_i_picks", spy)
    e = fsdask.JolliffeI(n_features_to_select=12).fit(X)
    assert seen[0] is not None and seen[0].shape == (B.shape[0],)
    assert e.result_.attrs["pick_order"] == ref.tolist()
    order, last = picks(B, 12, s=s[: B.shape[0]])
    np.testing.assert_array_equal(order, ref)
    np.testing.assert_allclose(last, ref_last, rtol=1e-9, atol=1e-12 * ref_last.max())


class _Stopped(Exception):
    pass


def test_jolliffe_i_stopped_at_a_pick_continues_after_the_last_saved_one(tmp_path, monkeypatch):
    """Killed at its 4th pick, a JolliffeI fit run again starts at the 4th: the picks made
    (and K downdated by them) come from the checkpoint, the result is the uninterrupted one."""
    from fsdask import checkpoint
    from fsdask.fitting import FitContext

    X = np.random.default_rng(1).normal(size=(30, 25))
    ref = fsdask.JolliffeI(n_features_to_select=8).fit(X)
    log_iteration, seen = FitContext.log_iteration, []

    def stop_at_4(self, it, **values):
        seen.append(it)
        if it == 4 and stop:
            raise _Stopped
        return log_iteration(self, it, **values)

    monkeypatch.setattr(FitContext, "log_iteration", stop_at_4)
    path, stop = tmp_path / "ck", True
    with checkpoint.checkpointing(path, every=1), pytest.raises(_Stopped):
        fsdask.JolliffeI(n_features_to_select=8).fit(X)
    assert checkpoint.peek(path)["jolliffe_i/picks"] == 3
    seen.clear()
    stop = False
    with checkpoint.checkpointing(path, every=1):
        again = fsdask.JolliffeI(n_features_to_select=8).fit(X)
    assert seen == [4, 5, 6, 7, 8]
    assert again.result_.attrs["pick_order"] == ref.result_.attrs["pick_order"]
    np.testing.assert_array_equal(again.scores_, ref.scores_)


@pytest.mark.parametrize(
    "estimator, pattern",
    [
        (
            fsdask.SparsePCASelector(n_features_to_select=3),
            r"spca: iteration 1: alpha=\S+, nonzero=\d+",
        ),
        (
            fsdask.PFA(n_features_to_select=3, n_init=4),
            r"pfa: iteration 1: inertia=\S+, lloyd_iterations=\d+",
        ),
    ],
    ids=["spca", "pfa"],
)
def test_spca_bisection_and_pfa_restarts_show_progress(estimator, pattern, X):
    import io
    import re

    from fsdask.fitting import progress_lines

    out = io.StringIO()
    with progress_lines(stream=out, every=0):
        estimator.fit(X)
    lines = [ln for ln in out.getvalue().splitlines() if ": iteration " in ln]
    assert lines and re.search(pattern, lines[0]), out.getvalue()
    if isinstance(estimator, fsdask.PFA):  # the time left names the parameter that bounds it
        assert len(lines) == 4 and "more to n_init=4" in lines[0]
    else:
        assert "more to max_bisect=30" in lines[0]


def _unreadable(n, p):
    """A lazy n × p X whose blocks fail when read: a refusal must come from its shape."""

    def boom(block):
        raise AssertionError("X was read")

    return da.zeros((n, p), chunks=(n, max(1, p // 10))).map_blocks(boom, dtype=np.float64)


CLIENT_HOLDERS = [
    fsdask.JolliffeI(),
    fsdask.JolliffeNI(),
    fsdask.PFA(),
    fsdask.SparsePCASelector(),
    fsdask.CPFS(max_scan_flops=None),
]


@pytest.mark.parametrize("estimator", CLIENT_HOLDERS, ids=lambda e: type(e).__name__)
@pytest.mark.parametrize("shape", [(100_000, 10_000_000), (10**9, 100_000)], ids=["wide", "tall"])
def test_an_array_this_machine_cannot_hold_is_refused_before_x_is_read(estimator, shape):
    """The factor B (min(n, p) × p) or SparsePCA's centred X would not fit in this
    process: one line, before any block of X is read — not an allocation failure hours in."""
    from distributed.system import MEMORY_LIMIT

    n, p = shape
    held = 8.0 * n * p if isinstance(estimator, fsdask.SparsePCASelector) else 8.0 * min(n, p) * p
    assert held > MEMORY_LIMIT  # the premise
    with pytest.raises(fsdask.InputError, match="more than this machine's memory") as err:
        estimator.fit(_unreadable(n, p))
    assert "\n" not in str(err.value) and f"{n} samples × {p} features" in str(err.value)


def test_cpfs_path_refuses_a_factor_this_machine_cannot_hold_before_reading_x():
    with pytest.raises(fsdask.InputError, match="cpfs_path on 100000 samples × 10000000"):
        fsdask.cpfs_path(_unreadable(100_000, 10_000_000), max_scan_flops=None)


@pytest.mark.parametrize("call", ["estimator", "path"])
def test_cpfs_counts_its_scans_residuals_not_only_its_factor(call):
    """A CPFS factor B of a quarter of this machine's memory fits, but its KKT scans hold
    about 8 arrays of B's size: refused before X is read, naming them."""
    from distributed.system import MEMORY_LIMIT

    from fsdask.methods.cpfs.problem import SCAN_ARRAYS

    n = p = int(np.sqrt(MEMORY_LIMIT / 4 / 8))
    assert 8.0 * n * p < MEMORY_LIMIT < SCAN_ARRAYS * 8.0 * n * p  # the premise
    with pytest.raises(fsdask.InputError, match="KKT scans' residuals") as err:
        if call == "path":
            fsdask.cpfs_path(_unreadable(n, p), max_scan_flops=None)
        else:
            fsdask.CPFS(max_scan_flops=None).fit(_unreadable(n, p))
    assert "more than this machine's memory" in str(err.value) and "\n" not in str(err.value)


def test_a_factor_above_the_budget_is_announced_and_the_fit_goes_on(X):
    import io

    import dask

    from fsdask.fitting import progress_lines

    out = io.StringIO()
    with dask.config.set({"fsdask.memory-budget": 1000}), progress_lines(stream=out, every=0):
        e = fsdask.JolliffeNI(n_features_to_select=3).fit(X)
    assert e.support_.sum() == 3
    # 12 × 12 float64: 1152 bytes
    assert "jolliffe_ni: its factor B (min(n, p) × p float64) takes 1.12 kiB" in out.getvalue()


def test_the_cli_refuses_a_factor_too_large_with_exit_2(tmp_path, capsys):
    import zarr

    from fsdask.cli import main

    store = tmp_path / "huge.zarr"
    g = zarr.open_group(str(store), mode="w", zarr_format=3)
    g.create_array(
        "X",
        shape=(100_000, 10_000_000),
        chunks=(100_000, 1_000),
        dtype="float32",
        dimension_names=("sample", "feature"),
    )  # metadata only: no chunk is ever written
    out = tmp_path / "sel.zarr"
    capsys.readouterr()
    code = main(["select", str(store), "--method", "jolliffe_i", "-o", str(out), "--no-progress"])
    err = capsys.readouterr().err
    assert code == 2, err
    assert "more than this machine's memory" in err and len(err.strip().splitlines()) == 1
    assert not out.exists()
