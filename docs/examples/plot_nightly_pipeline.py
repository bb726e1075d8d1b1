"""
A nightly pipeline
==================

A two-step pipeline (ingest, then a t-test selection) run twice, as a scheduler would run
it on two nights: the second run skips both steps because nothing changed; changing the
input makes both run again. The history gives the stability of the top features.
"""

import io
import tempfile
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import yaml

from fsdask.pipeline import run_pipeline

folder = Path(tempfile.mkdtemp())


def new_data(seed):
    """Night ``seed``'s data: 40 samples, 300 features, the first 5 shifted in class 1."""
    r = np.random.default_rng(seed)
    X = r.normal(size=(40, 300)).astype(np.float32)
    y = np.repeat([0, 1], 20)
    X[y == 1, :5] += 1.5
    np.savez(folder / "data.npz", X=X, y=y)


config = {
    "steps": [
        {"name": "ingest", "ingest": {"source": "data.npz", "url": "data.zarr", "overwrite": True}},
        {
            "name": "ttest",
            "select": {
                "url": "data.zarr",
                "method": "ttest",
                "param": {"n_features_to_select": 10},
                "output": "ttest.zarr",
            },
        },
    ]
}
(folder / "nightly.yaml").write_text(yaml.safe_dump(config))

log = io.StringIO()  # what each step prints (a terminal shows it)
new_data(0)
print("night 1:", run_pipeline(folder / "nightly.yaml", out=log))  # everything runs
print("night 2:", run_pipeline(folder / "nightly.yaml", out=log))  # nothing changed
new_data(1)
print("night 3:", run_pipeline(folder / "nightly.yaml", out=log))  # new data: both run
print(log.getvalue().splitlines()[-1])

# %%
# Every night appended to the history (``nightly.state.history.jsonl``): the top 10 of
# each, the skipped night repeating the one before.

history = [
    yaml.safe_load(line)
    for line in (folder / "nightly.state.history.jsonl").read_text().splitlines()
]
runs = [h for h in history if h.get("step") == "ttest" and h.get("top_k")]
fig, ax = plt.subplots(figsize=(6, 2.8))
for i, h in enumerate(runs):
    ids = [int(f) for f in h["top_k"][:10]]
    ax.scatter(ids, [i] * len(ids), c=["C3" if f < 5 else "C0" for f in ids], s=18)
ax.set_yticks(range(len(runs)), [f"night {i + 1}" for i in range(len(runs))])
ax.set_xlabel("feature id in the night's top 10 (red: the 5 relevant ones)")
fig.tight_layout()
