"""``fsdask demo``: a realistic synthetic problem, end to end, on a local Dask cluster.

Builds two problems as Zarr stores streamed chunk by chunk, runs every selection method at
its defaults on a LocalCluster, prints the top features with the truly relevant ones marked,
and writes each result next to the data:

* Weston's "linear" problem, for the methods that use labels: 6 relevant features hidden
  among 200 000 noise features, 100 samples;
* the cluster model of Wolf & Shashua (§6), unlabelled, for Q-α, which is unsupervised:
  100 samples in 4 clusters that only 100 of 20 000 features show (the others are the same
  kind of column with its samples permuted);
* a principal-features model, unlabelled, for CPFS, which keeps the columns that
  reconstruct X: 10 source columns, and 19 990 noisy multiples of them.
"""

from __future__ import annotations

import os
import time

from fsdask.api.common import check_count, running
from fsdask.api.spec import command

#: what the demo shows (the description of ``fsdask demo --help``)
ABOUT = __doc__
#: (method, parameters) run by the demo, in order: every method at its defaults on the raw
#: data (only the number of features to report is set); a method whose module is not in
#: this installation is skipped with a note.
DEMO_METHODS: list[tuple[str, dict]] = [
    ("ttest", {"n_features_to_select": 10}),
    ("logo", {"n_features_to_select": 10}),
    ("hsic", {"n_features_to_select": 10}),
    ("qalpha", {}),
    ("cpfs", {"n_features_to_select": 10}),
]
#: the problem each method is shown on (the others: Weston's labelled problem).  Q-α finds
#: the features that carry the samples' cluster structure, which Weston's problem does not
#: have; CPFS keeps the columns that reconstruct all of X, which on Weston's problem are
#: independent noise columns (its relevant features are redundant copies of each other)
PROBLEM_OF = {"qalpha": "qalpha_clusters", "cpfs": "principal_sources"}
#: the cluster problem: features, and the share of them that show the clusters (Q-α needs
#: the relevant features to be a visible share: 0.5 % is the scale benchmark's ratio)
CLUSTER_FEATURES, CLUSTER_RELEVANT_SHARE, CLUSTERS = 20_000, 0.005, 4
#: the principal-features problem: features, and the sources among them (= CPFS's q)
PRINCIPAL_FEATURES, SOURCES = 20_000, 10


@command(outputs=("folder",), step=False)
def demo(
    folder: str = "fsdask-demo",
    *,
    features: int = 200_000,
    samples: int = 100,
    seed: int = 0,
    methods: list[str] | None = None,
    scheduler: str = "local:2",
    memory_limit: str | None = None,
    progress: bool = True,
) -> None:
    """Run the demo into ``folder`` (its data and results are replaced on a re-run; nothing else is).

    Parameters
    ----------
    folder : str
        Where the data and results go.
    features, samples : int
        The size of Weston's labelled problem.
    seed : int
        The seed of every problem.
    methods : list of str, optional
        Names of :data:`fsdask.methods.REGISTRY` to run (default: those of
        :data:`DEMO_METHODS`).
    scheduler, memory_limit, progress
        Where to run (:func:`fsdask.cluster.scheduler`) and whether to show progress.
    """
    from fsdask.errors import ParameterError
    from fsdask.io.outputs import check_output
    from fsdask.methods import REGISTRY, available_methods

    check_count(features, "--features", 6)
    check_count(samples, "--samples", 4)
    # spelled as the registry spells them (``get_method`` accepts "Jolliffe-I" for "jolliffe_i")
    wanted = [m.lower().replace("-", "_") for m in methods or [m for m, _ in DEMO_METHODS]]
    unknown = [m for m in wanted if m not in REGISTRY]
    if unknown:  # before any data is written
        raise ParameterError(
            f"unknown method {unknown[0]!r}; available: {', '.join(available_methods())}"
        )
    problems: dict[str, list[str]] = {}
    for m in wanted:
        problems.setdefault(PROBLEM_OF.get(m, "weston_linear"), []).append(m)
    stores = {name: os.path.join(folder, f"{name}.zarr") for name in problems}
    for store in stores.values():  # before any work: refuse a folder fsdask did not write
        check_output(store, kind="dataset", overwrite=True)
    os.makedirs(folder, exist_ok=True)
    t0 = time.perf_counter()
    with running(scheduler, memory_limit, progress) as client:
        where = (
            "threads in this process"
            if client is None
            else f"{client.cluster.__class__.__name__ if client.cluster else 'cluster'} with {len(client.scheduler_info().get('workers', {}))} workers"
        )
        print(f"fsdask demo — running on {where}")
        for name, store in stores.items():
            ds, relevant = _write_problem(name, store, features, samples, seed)
            for method in problems[name]:
                _run_method(method, ds, store, relevant, folder)
    print(
        f"demo finished in {time.perf_counter() - t0:.1f} s; open a result with "
        f"fsdask.open_result('{os.path.join(folder, f'result_{wanted[0]}.zarr')}') or `fsdask info …`"
    )


def _write_problem(name: str, store: str, features: int, samples: int, seed: int):
    """Write problem ``name`` to ``store``; return it opened and its relevant features."""
    from fsdask.datasets import principal_sources, qalpha_clusters, weston_linear, write_synthetic
    from fsdask.io import open_dataset

    t0 = time.perf_counter()
    if name == "weston_linear":
        syn = weston_linear(n_samples=samples, n_features=features, random_state=seed)
        what = "labelled: the t-test, Logo and SparseHSIC use y"
    elif name == "principal_sources":
        syn = principal_sources(
            n_samples=samples,
            n_features=PRINCIPAL_FEATURES,
            n_sources=SOURCES,
            random_state=seed,
        )
        what = f"unlabelled: every feature a noisy multiple of one of {SOURCES} source features"
    else:
        n_rel = round(CLUSTER_FEATURES * CLUSTER_RELEVANT_SHARE)
        syn = qalpha_clusters(
            CLUSTERS, n_points=samples, n_relevant=n_rel,
            n_irrelevant=CLUSTER_FEATURES - n_rel, random_state=seed,
        )  # fmt: skip
        syn.dataset = syn.dataset.drop_vars("y")  # unlabelled: Q-α is fitted without y
        what = f"unlabelled: {CLUSTERS} clusters of samples that only the relevant features show"
    write_synthetic(syn, store, overwrite=True)
    ds = open_dataset(store)
    relevant = {str(i) for i in syn.relevant}
    shown = ", ".join(sorted(relevant, key=int)[:10]) + (", …" if len(relevant) > 10 else "")
    print(
        f"wrote {store}: {ds.sizes['sample']} samples × {ds.sizes['feature']} features "
        f"({ds['X'].nbytes / 2**20:.0f} MiB, {len(ds['X'].chunks[1])} chunks) in "
        f"{time.perf_counter() - t0:.1f} s; {what}; truly relevant: {len(relevant)} "
        f"(features {shown})\n"
    )
    return ds, relevant


def _run_method(name: str, ds, store: str, relevant: set, folder: str) -> None:
    """Fit ``name`` at its demo parameters, write its result, print what it found (a method
    whose module this installation lacks is skipped with a note)."""
    from fsdask.methods import available_methods, get_method
    from fsdask.results import write_result

    if name not in available_methods():
        print(f"[{name}] not available in this version — skipped\n")
        return
    t1 = time.perf_counter()
    est = get_method(name, **dict(DEMO_METHODS).get(name, {}))
    est.fit(ds)
    out = os.path.join(folder, f"result_{name}.zarr")
    est.result_.attrs["input_store"] = store
    write_result(est.result_, out, overwrite=True, inputs=(store,))
    print(f"[{name}] {time.perf_counter() - t1:.1f} s — ", end="")
    print_found(est.result_, relevant)
    print(f"result: {out}\n")


def print_found(res, relevant: set, k: int = 10, file=None) -> int:
    """Print what a result found: how many selected features have a positive weight and how
    many of them are relevant, then the top ``k`` of those features.

    A selected feature of weight 0 is not found, whatever its rank (ties at 0 are ordered by
    column, and a problem's planted features often sit in the first columns): such features
    are counted in a note, never listed as found.

    Parameters
    ----------
    res : xarray.Dataset
        A selection result.
    relevant : set of str
        The ids of the truly relevant features.
    k : int
        How many found features to list.
    file : file, optional
        Where to print (default: ``sys.stdout``).

    Returns
    -------
    int
        How many relevant features were found.
    """
    import sys

    import numpy as np

    from fsdask.results import print_top

    file = file or sys.stdout
    positive = res["weight"].values > 0
    selected = res["selected"].values.astype(bool)
    chosen = res["feature"].values[selected & positive].astype(str)
    found = len(relevant & set(chosen))
    zero = int((selected & ~positive).sum())
    print(
        f"selected {len(chosen)} features with a positive weight: {found} of the "
        f"{len(relevant)} relevant ones"
        + (f"; {zero} more selected feature(s) have weight 0 and are not counted" if zero else ""),
        file=file,
    )
    print_top(res.isel(feature=np.flatnonzero(positive)), k, relevant, file=file)
    return found
