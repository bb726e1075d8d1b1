"""
CPFS's path and reconstruction curve
====================================

A principal-features model: 8 source columns and 292 noisy multiples of them. CPFS's
regularisation path (Masaeli et al., Fig. 1) lets the sources enter first; keeping them
reconstructs most of X.
"""

import matplotlib.pyplot as plt
import numpy as np

import fsdask
from fsdask.datasets import principal_sources
from fsdask.evaluate import reconstruction_curve

syn = principal_sources(n_samples=60, n_features=300, n_sources=8, random_state=0)
X = syn.dataset["X"].values

path = fsdask.cpfs_path(X, n_lambdas=10)
sel = fsdask.CPFS(n_features_to_select=8).fit(X)
print("selected:", np.sort(sel.get_support(indices=True)), "sources:", syn.relevant)

# %%
# Left: the row norms of A along λ (one line per feature that ever enters). Right: the
# share of ‖X‖² left unexplained by the top-m features of CPFS's ranking.

norms = path["path_row_norm"].values
lam = path["lambda"].values
entered = np.flatnonzero(norms.max(axis=0) > 0)
curve = reconstruction_curve(X, np.argsort(sel.ranking_)[:30])
fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(9, 3.6))
ax1.plot(lam, norms[:, entered], lw=0.8)
ax1.set_xscale("log")
ax1.invert_xaxis()
ax1.set_xlabel("λ")
ax1.set_ylabel("‖a_i‖∞")
ax2.plot(np.arange(1, len(curve) + 1), curve, marker=".")
ax2.set_xlabel("features kept (m)")
ax2.set_ylabel("reconstruction error")
fig.tight_layout()
