"""
SparseHSIC's ρ path
===================

Zarkoob's regression problem (§3.4.1): y = sin(x₄) + sin(x₉) + x₁₄² + noise over 2 000
uniform features. SparseHSIC selects the rows of A = X H Δᵀ/(n − 1) above ρ; the path shows
how many features each ρ keeps.
"""

import matplotlib.pyplot as plt
import numpy as np

import fsdask
from fsdask.datasets import zarkoob_regression

syn = zarkoob_regression(n_samples=100, n_features=2000, random_state=0)
X, y = syn.dataset["X"].values, syn.dataset["y"].values

sel = fsdask.SparseHSIC().fit(X, y)
print("selected:", sel.get_support(indices=True), "relevant:", syn.relevant)

# %%
# The ρ path (computed on first access): the selection shrinks as ρ grows.

path = sel.rho_path_
fig, ax = plt.subplots(figsize=(6, 3.6))
ax.step(path["rho"], path["n_selected"], where="post")
ax.axvline(sel.result_.attrs["rho"], color="C3", lw=1, label="ρ chosen ('auto')")
ax.set_xscale("log")
ax.set_yscale("symlog")
ax.set_xlabel("ρ")
ax.set_ylabel("features selected")
ax.legend()
fig.tight_layout()
np.testing.assert_array_less(0, len(path["rho"]))
