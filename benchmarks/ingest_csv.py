"""Streaming ingest of a features-as-rows CSV with 10⁶ feature rows: time and peak memory.

Writes (once) a CSV with a header ``feature,s0,…`` and one row per feature, then runs
``fsdask.ingest(..., orient="features")`` in a fresh subprocess and prints its wall time and
peak RSS next to the sizes of the CSV and of the matrix: streaming means the peak stays
near one Zarr chunk + one batch of rows, far below the matrix size.

    flock /work/.bench.lock python benchmarks/ingest_csv.py   # 10⁶ and 2×10⁶ rows × 20 samples
    flock /work/.bench.lock python benchmarks/ingest_csv.py --rows 2000000 --samples 50

The peak should not grow from 10⁶ to 2×10⁶ rows (the default runs both).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _harness import Bench, add_args  # noqa: E402

FLOOR = r"""
import json, sys, time
t0 = time.perf_counter()
with open(sys.argv[1], "rb") as fh:
    while fh.read(16 * 2**20):
        pass
print(json.dumps({"time": time.perf_counter() - t0}))
"""

CHILD = r"""
import json, resource, sys, time
import fsdask
hwm = lambda: int(open('/proc/self/status').read().split('VmHWM:')[1].split()[0])  # KiB; ru_maxrss survives exec
src, dst, chunk_mb, batch = sys.argv[1], sys.argv[2], float(sys.argv[3]), int(sys.argv[4])
base = hwm()
t0 = time.perf_counter()
fsdask.ingest(src, dst, orient="features", overwrite=True, chunk_bytes=int(chunk_mb * 2**20), batch=batch)
t = time.perf_counter() - t0
peak = hwm()  # before reading anything back
ds = fsdask.open_dataset(dst)
print(json.dumps({"time": t, "peak_rss_mib": peak / 1024,
                  "rss_after_imports_mib": base / 1024, "shape": list(ds["X"].shape),
                  "chunks": len(ds["X"].chunks[1])}))
"""


def write_csv(path: str, rows: int, samples: int, seed: int = 0) -> None:
    rng = np.random.default_rng(seed)
    with open(path, "w") as fh:
        fh.write(",".join(["feature"] + [f"s{i}" for i in range(samples)]) + "\n")
        step = 50_000
        for r0 in range(0, rows, step):
            r1 = min(rows, r0 + step)
            block = rng.standard_normal((r1 - r0, samples)).astype(np.float32)
            lines = [
                f"f{r0 + i}," + ",".join(f"{v:.5f}" for v in row) for i, row in enumerate(block)
            ]
            fh.write("\n".join(lines) + "\n")


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument(
        "--rows",
        default="1000000,2000000",
        help="feature rows, comma-separated sizes (default 10⁶ and 2×10⁶)",
    )
    ap.add_argument("--samples", type=int, default=20)
    ap.add_argument("--chunk-mb", type=float, default=16.0)
    ap.add_argument("--batch", type=int, default=10_000, help="CSV rows parsed at a time")
    ap.add_argument("--dir", default=os.path.join(os.path.dirname(__file__), "out"))
    add_args(ap, "ingest_csv")
    args = ap.parse_args()
    os.makedirs(args.dir, exist_ok=True)
    bench = Bench("ingest_csv", args.results)
    for rows in [int(r) for r in str(args.rows).split(",")]:
        run(args, rows, bench)
    bench.write()


def run(args: argparse.Namespace, rows: int, bench: Bench) -> None:
    """The ingest and the floor (reading the CSV's bytes once), each in a subprocess, alternating."""
    print = bench.line  # noqa: A001 - every line of the report goes to the result file
    src = os.path.join(args.dir, f"features_as_rows_{rows}x{args.samples}.csv")
    if not os.path.exists(src):
        t0 = time.perf_counter()
        write_csv(src + ".tmp", rows, args.samples)
        os.replace(src + ".tmp", src)
        print(f"wrote {src} in {time.perf_counter() - t0:.1f} s (single run)")
    dst = os.path.join(args.dir, "ingest_csv.zarr")
    env = {
        **os.environ,
        "PYTHONPATH": os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
        + os.pathsep
        + os.environ.get("PYTHONPATH", ""),
    }
    last: dict = {}

    def child(code, *argv):
        def go():
            out = subprocess.run(
                [sys.executable, "-c", code, *argv], capture_output=True, text=True, env=env
            )
            if out.returncode != 0:
                sys.exit(out.stderr)
            last[code] = json.loads(out.stdout.strip().splitlines()[-1])
            return last[code]

        return go

    t = bench.alternate(
        {
            "floor": child(FLOOR, src),
            "ingest": child(CHILD, src, dst, str(args.chunk_mb), str(args.batch)),
        },
        args.repeat,
    )
    r = last[CHILD]
    matrix_mib = rows * args.samples * 4 / 2**20
    print(
        f"csv        {os.path.getsize(src) / 2**20:8.0f} MiB  ({rows} feature rows × {args.samples} samples)"
    )
    print(
        f"matrix     {matrix_mib:8.0f} MiB  float32, stored as {r['chunks']} chunks of ≤ {args.chunk_mb:g} MiB"
    )
    print(f"floor      {t['floor']}  (reading the CSV's bytes once)")
    print(
        f"ingest     {t['ingest']}  = {Bench.ratio(t['ingest'], t['floor'])} floor "
        f"({rows / t['ingest'].seconds:.0f} rows/s), batches of {args.batch} rows"
    )
    print(
        f"peak RSS   {r['peak_rss_mib']:8.0f} MiB  (of which {r['rss_after_imports_mib']:.0f} MiB after imports); "
        f"shape read back {tuple(r['shape'])}"
    )


if __name__ == "__main__":
    main()
