"""Behaviour-equivalence check: fit every registered estimator, save its ``result_``, refit, compare.

A refactoring that claims "behaviour unchanged" runs this script before and after::

    python tools/equivalence.py save DIR       # at the old commit: one store per case
    python tools/equivalence.py compare DIR    # at the new commit: refit and compare

A *case* is one estimator configuration (every entry of ``fsdask.methods.REGISTRY``, and
the cheap Q-α variants) × one data set (a column subset of the Golub leukemia matrix and
the UCI ionosphere table from ``../shared/data``, and seeded ``fsdask.datasets``
generators) × one input kind (numpy, or an xarray over a dask array in several feature
blocks).  ``save`` writes, per case, ``<case>.zarr`` (the ``result_`` dataset, its attrs as
one JSON string) and ``<case>.npz`` (``scores_``, ``ranking_``, ``support_``), and a
``manifest.json``.  ``compare`` refits every case and checks:

* the selection is identical: ``support_`` and ``ranking_`` equal;
* every floating variable of ``result_`` and ``scores_`` is equal to ``rtol=1e-12``
  (``atol`` = 1e-12 × the variable's largest magnitude, for entries that are zero up to
  rounding); the cases where every variable is bit-identical are counted;
* integer, boolean and string variables are equal; the attrs are equal (floats, also inside
  lists and dicts, to the same tolerance), except timings and library versions.  An attr or
  a ``parameters`` key that the new code *adds* is listed as a note, not a failure; one it
  *drops* is a failure, unless :data:`RENAMED_ATTRS` names its new name.

It exits 1 listing every difference, else 0 with a one-line summary.  ``--only PATTERN``
(``fnmatch`` on the case names, repeatable) restricts both commands; ``list`` prints the
case names.  Everything runs on one thread (dask's threaded scheduler with one worker,
BLAS limited to one thread) so the figures are reproducible; a full run takes about two
minutes on one core.  Estimators are built only from documented public parameters,
filtered by ``get_params()``, so the script runs unchanged across a redesign.
"""

from __future__ import annotations

import os

# one BLAS thread: reproducible sums, and the run stays on one core (set before numpy loads)
for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import argparse  # noqa: E402
import fnmatch  # noqa: E402
import json  # noqa: E402
import math  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
import warnings  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any, Callable  # noqa: E402

import dask  # noqa: E402
import dask.array as da  # noqa: E402
import numpy as np  # noqa: E402
import xarray as xr  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

SHARED_DATA = Path(os.environ.get("FSDASK_SHARED_DATA", ROOT.parent / "shared" / "data"))
RTOL = 1e-12
#: attrs that legitimately differ between runs or installs (timings, versions, creation time)
IGNORED_ATTRS = ("wall_time", "seconds", "_version", "elapsed", "timing", "created")
#: result_ variables that are timings
IGNORED_VARS = ("seconds", "wall_time", "elapsed")
#: attrs renamed on purpose (old name → new name): compared under the new name, with a note
RENAMED_ATTRS = {"passes_over_X": "n_passes"}
ATTRS_KEY = "equivalence_attrs_json"
FEATURE_BLOCKS = 3


# ---------------------------------------------------------------- data sets
def _golub() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Golub leukemia (72 × 7129): the 300 highest-variance probes, in file order."""
    with np.load(SHARED_DATA / "leukemia_golub.npz", allow_pickle=False) as d:
        X, y = d["X"], d["y"]
        names = d["feature_names"].astype(str)
    cols = np.sort(np.argsort(-X.var(axis=0), kind="stable")[:300])
    return X[:, cols], y, names[cols]


def _ionosphere() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """UCI ionosphere (351 × 34; one constant column), whole."""
    with np.load(SHARED_DATA / "uci_ionosphere.npz", allow_pickle=False) as d:
        X, y = d["X"], d["y"]
    return X, y, np.array([f"f{j}" for j in range(X.shape[1])])


def _synthetic(name: str, **kw: Any) -> Callable[[], tuple[np.ndarray, np.ndarray, np.ndarray]]:
    def make():
        import fsdask.datasets as fd

        s = getattr(fd, name)(**kw)
        X = np.asarray(s.X.values)
        y = np.asarray(s.y)
        return X, y, np.array([f"f{j}" for j in range(X.shape[1])])

    return make


DATASETS: dict[str, Callable[[], tuple[np.ndarray, np.ndarray, np.ndarray]]] = {
    "golub300": _golub,
    "ionosphere": _ionosphere,
    "weston": _synthetic("weston_linear", n_samples=60, n_features=120, random_state=3),
    "spiral": _synthetic("fermat_spiral", n_irrelevant=38, n_per_class=40, random_state=1),
    "qclusters": _synthetic("qalpha_clusters", n_clusters=2, random_state=2),  # 60 × 125
}


# ---------------------------------------------------------------- estimators
def _configs() -> dict[str, tuple[str, dict[str, Any]]]:
    """config name → (registry name, parameters); every registry entry, Q-α variants too."""
    from fsdask.methods import REGISTRY

    small = {
        "qalpha": {"max_iter": 40},
        "logo": {"max_iter": 10},
        "hsic": {"n_features_to_select": 6},
        "cpfs": {"n_features_to_select": 8},
        "jolliffe_i": {"n_features_to_select": 6},
        "jolliffe_ni": {"n_features_to_select": 6},
        "pfa": {"n_features_to_select": 6, "n_init": 3},
        "spca": {"n_features_to_select": 6, "max_bisect": 6},
    }
    out = {name: (name, dict(small.get(name, {}))) for name in REGISTRY}
    # "gap" is left out: it costs minutes on these data sets (an n² × n² problem at n = 351)
    for variant in ("basic", "ritz", "laplacian"):
        out[f"qalpha_{variant}"] = ("qalpha", {"max_iter": 40, "variant": variant})
    out["qalpha_unsupervised"] = ("qalpha", {"max_iter": 40, "supervised": False})
    out["qalpha_kernel"] = ("qalpha", {"max_iter": 20, "variant": "kernel", "kernel": "rbf"})
    return out


#: config → data sets it runs on (all by default); the p² methods skip nothing: p ≤ 300
SKIP: dict[str, tuple[str, ...]] = {
    # SparsePCA (scikit-learn, dense, bisected) is the slowest baseline: two data sets suffice
    "spca": ("golub300", "ionosphere", "qclusters"),
    "qalpha_kernel": ("golub300",),
}


def make_estimator(config: str):
    """Build the estimator of ``config`` from public parameters its class declares."""
    from fsdask.methods import get_method

    name, params = _configs()[config]
    known = get_method(name).get_params()
    missing = sorted(set(params) - set(known))
    if missing:
        raise SystemExit(f"{config}: parameters {missing} are no longer accepted")
    return get_method(name, **params)


def cases() -> list[tuple[str, str, str, str]]:
    """(case name, config, data set, input kind) for every case."""
    out = []
    for config in _configs():
        for ds in DATASETS:
            if ds in SKIP.get(config, ()):
                continue
            for kind in ("np", "dask"):
                out.append((f"{config}__{ds}__{kind}", config, ds, kind))
    return out


_DATA_CACHE: dict[str, tuple[np.ndarray, np.ndarray, np.ndarray]] = {}


def _input(ds: str, kind: str) -> tuple[Any, np.ndarray]:
    if ds not in _DATA_CACHE:
        _DATA_CACHE[ds] = DATASETS[ds]()
    X, y, names = _DATA_CACHE[ds]
    if kind == "np":
        return X, y
    chunk = math.ceil(X.shape[1] / FEATURE_BLOCKS)
    Xa = xr.DataArray(
        da.from_array(X, chunks=(-1, chunk)),
        dims=("sample", "feature"),
        coords={"feature": names},
    )
    return Xa, y


def fit(config: str, ds: str, kind: str):
    X, y = _input(ds, kind)
    est = make_estimator(config)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return est.fit(X, y)


# ---------------------------------------------------------------- storage
def _jsonable(v: Any) -> Any:
    if isinstance(v, dict):
        return {str(k): _jsonable(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_jsonable(x) for x in v]
    if isinstance(v, np.ndarray):
        return _jsonable(v.tolist())
    if isinstance(v, (np.bool_, bool)):
        return bool(v)
    if isinstance(v, np.integer):
        return int(v)
    if isinstance(v, (np.floating, float)):
        f = float(v)
        return f if math.isfinite(f) else repr(f)
    if v is None or isinstance(v, (int, str)):
        return v
    return repr(v)


def snapshot(est) -> tuple[xr.Dataset, dict[str, np.ndarray]]:
    """``result_`` (attrs JSON-encoded, so any attr survives Zarr) and the fitted arrays."""
    res = est.result_.copy()
    attrs = _jsonable(dict(res.attrs))
    res.attrs = {ATTRS_KEY: json.dumps(attrs, sort_keys=True)}
    for v in res.variables.values():
        v.attrs = {k: json.dumps(_jsonable(x)) for k, x in v.attrs.items()}
        v.encoding = {}
    for name in list(res.variables):
        if res[name].dtype.kind in "OU":
            res[name] = res[name].astype(str)
    arrays = {
        "scores_": np.asarray(est.scores_),
        "ranking_": np.asarray(est.ranking_),
        "support_": np.asarray(est.support_),
    }
    return res.compute(), arrays


def save(out: Path, selected: list[tuple[str, str, str, str]]) -> int:
    out.mkdir(parents=True, exist_ok=True)
    manifest = {"commit": _commit(), "cases": {}}
    t0 = time.perf_counter()
    for case, config, ds, kind in selected:
        t = time.perf_counter()
        est = fit(config, ds, kind)
        res, arrays = snapshot(est)
        res.to_zarr(out / f"{case}.zarr", mode="w", consolidated=False)
        np.savez(out / f"{case}.npz", **arrays)
        manifest["cases"][case] = {"seconds": round(time.perf_counter() - t, 3)}
        print(f"{case}: {time.perf_counter() - t:.2f} s", file=sys.stderr)
    (out / "manifest.json").write_text(json.dumps(manifest, indent=1, sort_keys=True))
    print(f"saved {len(selected)} cases to {out} in {time.perf_counter() - t0:.0f} s")
    return 0


# ---------------------------------------------------------------- comparison
def _ignored(key: str, patterns: tuple[str, ...]) -> bool:
    return any(p in key for p in patterns)


def _close(a: np.ndarray, b: np.ndarray) -> bool:
    scale = np.nanmax(np.abs(b)) if b.size and np.isfinite(b).any() else 0.0
    return bool(np.allclose(a, b, rtol=RTOL, atol=RTOL * scale, equal_nan=True))


def _compare_values(where: str, new: Any, old: Any, diffs: list[str], notes: list[str]) -> None:
    """Attr values: dicts key by key (added keys are notes), lists item by item, floats to RTOL."""
    if isinstance(old, dict) and isinstance(new, dict):
        for k in sorted(set(old) | set(new)):
            if _ignored(k, IGNORED_ATTRS):
                continue
            if k not in new:
                diffs.append(f"{where}.{k}: dropped (was {old[k]!r})")
            elif k not in old:
                notes.append(f"{where}.{k}: added ({new[k]!r})")
            else:
                _compare_values(f"{where}.{k}", new[k], old[k], diffs, notes)
    elif isinstance(old, list) and isinstance(new, list) and len(old) == len(new):
        numeric = all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in old + new)
        if numeric and old:
            if not _close(np.asarray(new, float), np.asarray(old, float)):
                diffs.append(f"{where}: {_worst(np.asarray(new, float), np.asarray(old, float))}")
        else:
            for i, (n, o) in enumerate(zip(new, old)):
                _compare_values(f"{where}[{i}]", n, o, diffs, notes)
    elif (
        isinstance(old, float)
        and isinstance(new, (int, float))
        and not isinstance(new, bool)
        or isinstance(new, float)
        and isinstance(old, (int, float))
        and not isinstance(old, bool)
    ):
        if not _close(np.asarray([new], float), np.asarray([old], float)):
            diffs.append(f"{where}: {new!r} != {old!r}")
    elif new != old or type(new) is not type(old):
        diffs.append(f"{where}: {new!r} != {old!r}")


def _worst(a: np.ndarray, b: np.ndarray) -> str:
    if a.shape != b.shape:
        return f"shape {a.shape} != {b.shape}"
    with np.errstate(all="ignore"):
        rel = np.abs(a - b) / np.maximum(np.abs(b), np.finfo(float).tiny)
    rel = np.where(np.isnan(a) & np.isnan(b), 0.0, rel)
    i = int(np.nanargmax(rel)) if rel.size else 0
    return (
        f"max relative difference {np.nanmax(rel):.3g} at index "
        f"{np.unravel_index(i, a.shape)} ({a.flat[i]!r} vs {b.flat[i]!r})"
    )


def _compare_array(where: str, new: np.ndarray, old: np.ndarray, diffs: list[str]) -> bool:
    """Append a difference unless equal (floats: to RTOL); True when bit-identical."""
    if new.shape != old.shape:
        diffs.append(f"{where}: shape {new.shape} != {old.shape}")
        return False
    if new.dtype.kind in "fc" and old.dtype.kind in "fc":
        if np.array_equal(new, old, equal_nan=True):
            return True
        if not _close(new, old):
            diffs.append(f"{where}: {_worst(new, old)}")
        return False
    if not np.array_equal(new, old):
        bad = np.flatnonzero(np.asarray(new != old).ravel())
        diffs.append(f"{where}: {bad.size} entries differ (first at {bad[:5].tolist()})")
        return False
    return True


def compare_case(case: str, est, base: Path) -> tuple[list[str], list[str], bool]:
    """(differences, notes, bit-identical) of a refitted estimator against the saved case."""
    diffs: list[str] = []
    notes: list[str] = []
    if not (base / f"{case}.zarr").exists():
        return [f"{case}: not in the baseline {base}"], notes, False
    new, arrays = snapshot(est)
    old = xr.open_zarr(base / f"{case}.zarr", consolidated=False).load()
    exact = True
    with np.load(base / f"{case}.npz") as saved:
        for key in ("support_", "ranking_", "scores_"):
            if key not in saved.files:
                diffs.append(f"{case}: {key} missing from the baseline")
                exact = False
                continue
            exact &= _compare_array(f"{case}: {key}", arrays[key], saved[key], diffs)
    for name in sorted(set(old.variables) | set(new.variables)):
        if _ignored(name, IGNORED_VARS):
            continue
        if name not in new.variables:
            diffs.append(f"{case}: result_[{name!r}] dropped")
        elif name not in old.variables:
            notes.append(f"{case}: result_[{name!r}] added")
        else:
            exact &= _compare_array(
                f"{case}: result_[{name!r}]",
                np.asarray(new[name].values),
                np.asarray(old[name].values),
                diffs,
            )
    n_before = len(diffs)
    new_attrs, old_attrs = json.loads(new.attrs[ATTRS_KEY]), json.loads(old.attrs[ATTRS_KEY])
    for was, now in RENAMED_ATTRS.items():
        if was in old_attrs and was not in new_attrs and now in new_attrs and now not in old_attrs:
            old_attrs[now] = old_attrs.pop(was)
            notes.append(f"{case}: attrs.{was} is now attrs.{now}")
    _compare_values(f"{case}: attrs", new_attrs, old_attrs, diffs, notes)
    return diffs, notes, exact and len(diffs) == n_before


def compare(base: Path, selected: list[tuple[str, str, str, str]]) -> int:
    diffs: list[str] = []
    notes: list[str] = []
    exact = 0
    t0 = time.perf_counter()
    for case, config, ds, kind in selected:
        try:
            est = fit(config, ds, kind)
        except Exception as exc:  # a failing fit is a difference too; list them all
            diffs.append(f"{case}: fit raised {type(exc).__name__}: {exc}")
            continue
        d, n, e = compare_case(case, est, base)
        diffs += d
        notes += n
        exact += e
    for line in notes:
        print(f"note: {line}")
    if diffs:
        for line in diffs:
            print(f"DIFF {line}")
        print(f"{len(diffs)} difference(s) in {len(selected)} cases against {base}")
        return 1
    print(
        f"equivalent: {len(selected)} cases against {base} (baseline commit "
        f"{_manifest_commit(base)}): same selection, floats within rtol {RTOL:g}; "
        f"{exact} bit-identical, {len(selected) - exact} within tolerance "
        f"({time.perf_counter() - t0:.0f} s)"
    )
    return 0


# ---------------------------------------------------------------- command line
def _commit() -> str:
    try:
        out = subprocess.run(
            ["git", "-C", str(ROOT), "describe", "--always", "--dirty"],
            capture_output=True,
            text=True,
            check=True,
        )
        return out.stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def _manifest_commit(base: Path) -> str:
    try:
        return json.loads((base / "manifest.json").read_text()).get("commit", "?")
    except (OSError, ValueError):
        return "?"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("command", choices=("save", "compare", "list"))
    ap.add_argument("dir", nargs="?", type=Path)
    ap.add_argument("--only", action="append", default=[], metavar="PATTERN")
    args = ap.parse_args(argv)
    selected = [
        c for c in cases() if not args.only or any(fnmatch.fnmatch(c[0], p) for p in args.only)
    ]
    if args.command == "list":
        print("\n".join(c[0] for c in selected))
        return 0
    if args.dir is None:
        ap.error(f"{args.command} needs DIR")
    if not selected:
        ap.error(f"no case matches {args.only}")
    with dask.config.set(scheduler="threads", num_workers=1), warnings.catch_warnings():
        # Zarr warns that fixed-width strings (feature names) have no v3 specification yet
        warnings.filterwarnings("ignore", message=".*does not have a Zarr V3 specification")
        if args.command == "save":
            return save(args.dir, selected)
        return compare(args.dir, selected)


if __name__ == "__main__":
    sys.exit(main())
