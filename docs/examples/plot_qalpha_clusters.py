"""
Q-α on its cluster model
========================

Wolf & Shashua's §6 model: 60 points in 3 clusters visible in 5 relevant coordinates,
hidden among 120 coordinates whose values are permuted across samples. Q-α, unsupervised,
puts its weight α on the relevant coordinates.
"""

import matplotlib.pyplot as plt
import numpy as np

import fsdask
from fsdask.datasets import qalpha_clusters

syn = qalpha_clusters(n_clusters=3, random_state=0)
X = syn.dataset["X"].values

sel = fsdask.QAlpha(k=3, n_init=3).fit(X)
print("top 5:", np.sort(np.argsort(sel.ranking_)[:5]), "relevant:", syn.relevant)

# %%
# α is sparse and positive without being asked to be (the paper's "emergence of sparsity"):

fig, ax = plt.subplots(figsize=(6, 3.6))
colors = ["C3" if j in syn.relevant else "C0" for j in range(X.shape[1])]
ax.bar(np.arange(X.shape[1]), sel.scores_, color=colors)
ax.set_xlabel("feature (red: relevant)")
ax.set_ylabel("α")
fig.tight_layout()
