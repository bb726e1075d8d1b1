"""A fit killed at a random iteration and resumed from its checkpoint, against a restart.

    python examples/nightly/kill_and_resume.py [--method logo] [--features 20000] [--samples 120]
                                               [--max-iter 12] [--seed 0] [--work DIR]

Writes a synthetic store, then runs ``fsdask select`` three times as subprocesses:
(1) uninterrupted, without checkpoints — the reference result and the cost of a restart;
(2) with ``--checkpoint-every 1``, killed with SIGKILL once its checkpoint reaches a random
iteration k; (3) the same command again, which continues from the checkpoint.  Prints and
writes to ``examples/results/nightly_resume.md`` the wall times, the time saved by resuming
against restarting (T(1) − T(3)), the checkpoint's size, and checks that the resumed result
equals the reference (weights to 1e-12, same ranking and selection).
"""

from __future__ import annotations

import argparse
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import numpy as np  # noqa: E402
from _common import write_results_md  # noqa: E402

PARAMS = {
    "logo": ["--param", "theta=0.000000001"],
    "qalpha": ["--param", "tol=0", "--param", "k=3"],
}


def make_store(path: Path, n: int, p: int, seed: int) -> None:
    import xarray as xr

    import fsdask

    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, p)).astype(np.float32)
    y = np.arange(n) % 2
    X[y == 1, :10] += 1.0
    fsdask.write_dataset(
        xr.Dataset({"X": (("sample", "feature"), X), "y": ("sample", y)}), str(path)
    )


def command(store: Path, out: Path, args, *extra: str) -> list[str]:
    return [
        sys.executable,
        "-m",
        "fsdask.cli",
        "select",
        str(store),
        "--method",
        args.method,
        "--param",
        f"max_iter={args.max_iter}",
        "--param",
        "n_features_to_select=20",
        *PARAMS[args.method],
        "-o",
        str(out),
        "--no-progress",
        "--top",
        "0",
        "--overwrite",
        *extra,
    ]


def timed(cmd: list[str]) -> float:
    t0 = time.perf_counter()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - t0


def killed_at(cmd: list[str], ckpt: Path, k: int) -> tuple[float, int]:
    """Run ``cmd``, SIGKILL it once its checkpoint shows iteration ≥ k; (wall time, iteration)."""
    from fsdask import checkpoint

    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    while proc.poll() is None:
        if ckpt.exists() and max(checkpoint.peek(str(ckpt)).values()) >= k:
            proc.send_signal(signal.SIGKILL)
            break
        time.sleep(0.02)
    if proc.wait() != -signal.SIGKILL:
        raise SystemExit(f"the fit ended before iteration {k}; raise --max-iter or --features")
    return time.perf_counter() - t0, max(checkpoint.peek(str(ckpt)).values())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--method", choices=sorted(PARAMS), default="logo")
    ap.add_argument("--features", type=int, default=20000)
    ap.add_argument("--samples", type=int, default=120)
    ap.add_argument("--max-iter", type=int, default=12)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--work", help="working folder (default: a temporary one)")
    args = ap.parse_args()
    import fsdask

    with tempfile.TemporaryDirectory() as tmp:
        work = Path(args.work or tmp)
        work.mkdir(parents=True, exist_ok=True)
        store = work / "data.zarr"
        if not store.exists():
            make_store(store, args.samples, args.features, args.seed)
        ref, out = work / "ref.zarr", work / "out.zarr"
        ckpt = Path(f"{out}.fsdask-checkpoint")
        if ckpt.exists():
            ckpt.unlink()
        t_full = timed(command(store, ref, args))
        k = int(np.random.default_rng(args.seed).integers(1, args.max_iter - 1))
        t_killed, reached = killed_at(command(store, out, args, "--checkpoint-every", "1"), ckpt, k)
        size = ckpt.stat().st_size
        t_resume = timed(command(store, out, args, "--checkpoint-every", "1"))
        a, b = fsdask.open_result(ref), fsdask.open_result(out)
        same = bool(
            np.allclose(a["weight"].values, b["weight"].values, rtol=0, atol=1e-12)
            and (a["rank"].values == b["rank"].values).all()
            and (a["selected"].values == b["selected"].values).all()
        )
        rows = [
            [
                args.method,
                f"{args.samples} × {args.features}",
                a.attrs["n_iter"],
                reached,
                round(t_full, 2),
                round(t_killed, 2),
                round(t_resume, 2),
                round(t_full - t_resume, 2),
                f"{size / 1e6:.2f} MB",
                "yes" if same else "NO",
            ]
        ]
        header = [
            "method",
            "n × p",
            "iterations",
            "killed at",
            "restart (s)",
            "until kill (s)",
            "resume (s)",
            "saved (s)",
            "checkpoint",
            "result identical",
        ]
        for h, v in zip(header, rows[0]):
            print(f"{h:>16}: {v}")
        write_results_md(
            "nightly_resume",
            "A fit killed mid-way and resumed from its checkpoint",
            header,
            rows,
            notes=[
                "restart = an uninterrupted run without checkpoints (what a re-run without "
                "--resume costs); resume = the re-run continuing from the checkpoint; "
                "saved = restart − resume (process start and data opening are in both)",
                "wall times on a shared machine: indicative only",
            ],
        )
        if not same:
            raise SystemExit("the resumed result differs from the uninterrupted one")


if __name__ == "__main__":
    main()
