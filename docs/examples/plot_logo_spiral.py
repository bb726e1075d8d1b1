"""
Logo on the spiral
==================

Fermat's spiral (Sun, Todorovic & Goodison 2010, §5.1): two classes wound around each other
in features 0 and 1, hidden among 500 irrelevant N(0, 1) features. No single feature
separates the classes; Logo's local margins find both.
"""

import matplotlib.pyplot as plt
import numpy as np

import fsdask
from fsdask.datasets import fermat_spiral

syn = fermat_spiral(n_irrelevant=500, n_per_class=100, random_state=0)
X, y = syn.dataset["X"].values, syn.dataset["y"].values

logo = fsdask.Logo(sigma=2.0, lam=1.0).fit(X, y)
kept = np.flatnonzero(logo.get_support())
print("selected:", kept, "relevant:", syn.relevant)
print("weights of the first 4 features:", np.round(logo.scores_[:4], 3))

# %%
# The learned weights: the two spiral coordinates stand out, the rest are driven to zero.

fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(9, 3.6))
ax1.scatter(X[:, 0], X[:, 1], c=y, s=8, cmap="coolwarm")
ax1.set_title("features 0 and 1")
colors = np.where(np.isin(np.arange(X.shape[1]), syn.relevant), "C3", "C0")
ax2.scatter(np.arange(X.shape[1]), logo.scores_, c=colors, s=10)
ax2.set_xlabel("feature (red: the two spiral coordinates)")
ax2.set_ylabel("Logo weight")
fig.tight_layout()
