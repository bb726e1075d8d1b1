"""FitContext: the one driver of iterative loops (checkpointed dataclass state), warnings that
point at the user's line, and the pass count every estimator reports as ``n_passes_``."""

from __future__ import annotations

import dataclasses
import warnings

import numpy as np
import pytest

from fsdask import checkpoint
from fsdask.base import FitOutput, Selector
from fsdask.errors import ConvergenceWarning
from fsdask.fitting import FitContext


@dataclasses.dataclass
class _State:
    x: np.ndarray
    trace: list
    rng: np.random.Generator
    best: float = 0.0
    label: str | None = None


class _Walk(Selector):
    """A toy iterative method: a random walk of x, stopping when its norm passes a bound."""

    method_name = "walk"

    def __init__(self, bound=5.0, max_iter=50, n_features_to_select=None):
        self.bound = bound
        self.max_iter = max_iter
        self.n_features_to_select = n_features_to_select

    def _fit(self, X, y, ctx):
        calls = self.__dict__.setdefault("steps_run", [])

        def step(s: _State) -> _State:
            calls.append(len(s.trace))
            s.x = s.x + s.rng.normal(size=s.x.size)
            s.trace.append(float(np.linalg.norm(s.x)))
            s.best = max(s.best, s.trace[-1])
            s.label = f"at {len(s.trace)}"
            if getattr(self, "kill_at", None) == len(s.trace):
                raise KeyboardInterrupt
            return s

        state = _State(np.zeros(X.shape[1]), [], np.random.default_rng(0))
        loop = ctx.iterate(
            "walk",
            state,
            step,
            max_iter=self.max_iter,
            done=lambda s: s.trace[-1] > self.bound,
        )
        s = loop.state
        return FitOutput(
            scores=np.abs(s.x), n_iter=loop.n_iter, converged=loop.finished, objective=s.trace
        )


X = np.random.default_rng(1).normal(size=(10, 6))


def test_iterate_runs_until_done_or_max_iter():
    done = _Walk(bound=3.0).fit(X)
    assert done.converged_ and done.objective_[-1] > 3.0
    assert (done.objective_[:-1] <= 3.0).all()
    capped = _Walk(bound=1e9, max_iter=4).fit(X)
    assert capped.n_iter_ == 4 and capped.converged_ is False


def test_iterate_resumes_a_killed_fit_with_the_same_result(tmp_path):
    path = tmp_path / "walk.ck"
    ref = _Walk(bound=6.0).fit(X)
    with checkpoint.checkpointing(path, every=1):
        killed = _Walk(bound=6.0)
        killed.kill_at = 3
        with pytest.raises(KeyboardInterrupt):
            killed.fit(X)
    assert checkpoint.peek(path) == {"walk": 2}
    with checkpoint.checkpointing(path, every=1):
        resumed = _Walk(bound=6.0).fit(X)
    # the restored Generator continues the same stream: the walk is the uninterrupted one
    np.testing.assert_array_equal(resumed.scores_, ref.scores_)
    np.testing.assert_array_equal(resumed.objective_, ref.objective_)
    assert resumed.n_iter_ == ref.n_iter_ and resumed.steps_run[0] == 2
    # a finished loop is restored as finished: no step runs again
    with checkpoint.checkpointing(path, every=1):
        again = _Walk(bound=6.0).fit(X)
    assert "steps_run" not in again.__dict__ or again.steps_run == []
    np.testing.assert_array_equal(again.scores_, ref.scores_)
    assert again.converged_


def test_iterate_keeps_the_pass_count_across_a_resume(tmp_path):
    ctx = FitContext(_Walk()).bind(X)
    state = _State(np.zeros(2), [], np.random.default_rng(0))

    def step(s):
        ctx.execution.passes += 1
        s.trace.append(1.0)
        return s

    with checkpoint.checkpointing(tmp_path / "c.ck", every=1):
        ctx.iterate("loop", state, step, max_iter=3)
        again = FitContext(_Walk()).bind(X)
        loop = again.iterate("loop", state, step, max_iter=3)
    assert again.passes == 3 and loop.n_iter == 3 and not loop.finished


def test_iterate_needs_an_end():
    with pytest.raises(TypeError, match="never ends"):
        FitContext(_Walk()).iterate("x", _State(np.zeros(1), [], None), lambda s: s)


def test_warn_points_at_the_callers_line():
    ctx = FitContext(_Walk())
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        ctx.warn("stopped early")  # this line
    (w,) = caught
    assert w.category is ConvergenceWarning and w.filename == __file__


def test_every_estimator_reports_passes():
    from fsdask import Filter

    est = Filter(statistic="ttest").fit(X, np.r_[np.zeros(5), np.ones(5)])
    assert est.n_passes_ == 1  # the screen and the statistics share one pass
    assert _Walk().fit(X).n_passes_ == 0  # the toy never reads X after the screen
