"""
A filter on a public data set
=============================

The Wisconsin breast-cancer data (569 tumours × 30 features, shipped with scikit-learn) are
written to a Zarr store, ranked by Welch's t-test and by the KS statistic, and the top
features' p-values are read from the result.
"""

import tempfile
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
from sklearn.datasets import load_breast_cancer

import fsdask

data = load_breast_cancer()
folder = Path(tempfile.mkdtemp())
store = str(folder / "breast_cancer.zarr")
fsdask.ingest(data.data, store, y=data.target, feature_names=list(data.feature_names))
ds = fsdask.open_dataset(store)

ttest = fsdask.Filter(statistic="ttest", n_features_to_select=5).fit(ds)
ks = fsdask.Filter(statistic="ks", n_features_to_select=5).fit(ds)
table = ttest.result_[["rank", "weight", "pvalue_adj"]].to_dataframe()
print(table.sort_values("rank").head())

# %%
# The two statistics agree on the strongest features (size and concavity of the cells):

order = np.argsort(ttest.ranking_)
fig, ax = plt.subplots(figsize=(6, 4))
ax.scatter(ttest.scores_, ks.scores_, s=14)
for j in order[:5]:
    ax.annotate(str(ds["feature"].values[j]), (ttest.scores_[j], ks.scores_[j]), fontsize=7)
ax.set_xlabel("|t| (Welch)")
ax.set_ylabel("KS statistic")
fig.tight_layout()
