"""Sphinx configuration of the fsdask documentation site.

Built offline and strict: ``sphinx-build -W -n -b html docs docs/_build/html`` (warnings are
errors, every cross-reference must resolve).  No intersphinx: nothing is fetched at build
time, so references to numpy, xarray, dask, scikit-learn... are not links; references to
fsdask's own objects are checked (``nitpick_ignore_regex`` lists only foreign modules).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

DOCS = Path(__file__).resolve().parent
ROOT = DOCS.parent
sys.path.insert(0, str(ROOT))  # this checkout's fsdask, whatever is installed
sys.path.insert(0, str(DOCS / "_ext"))

import fsdask  # noqa: E402

project = "fsdask"
author = "the fsdask developers"
copyright = "the fsdask developers"  # noqa: A001  (Sphinx's name)
release = fsdask.__version__
version = release

extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "sphinx.ext.mathjax",
    "numpydoc",
    "myst_parser",
    "sphinx_copybutton",
    "sphinx_gallery.gen_gallery",
    "fsdask_docs",  # docs/_ext: CLI reference, results files, the reproductions' summary
]

source_suffix = {".rst": "restructuredtext", ".md": "markdown"}
exclude_patterns = [
    "_build",
    "_templates",
    "_generated",
    "Thumbs.db",
    ".DS_Store",
    "examples/GALLERY_HEADER.rst",
]
root_doc = "index"
nitpicky = True
templates_path = ["_templates"]
if os.environ.get("FSDASK_DOCS_GALLERY") == "skip":  # tests/test_docs.py's small projects
    extensions.remove("sphinx_gallery.gen_gallery")

# foreign objects named in signatures and docstrings: no inventory is fetched (offline build)
nitpick_ignore_regex = [
    (
        r"py:.*",
        r"(numpy|np|xarray|xr|dask|da|pandas|pd|scipy|sklearn|zarr|anndata|distributed|fsspec|matplotlib|icechunk)(\..*)?",
    ),
    (r"py:.*", r"(array-like|array_like|optional|default|callable|None|True|False)"),
]

# MyST: $…$ maths, ::: fences, `{py:func}` roles; headings get anchors down to ###
myst_enable_extensions = ["dollarmath", "colon_fence", "deflist"]
myst_heading_anchors = 3

# numpydoc renders the docstrings; autosummary writes one page per public object
autosummary_generate = True
autodoc_typehints = "none"  # types are in the numpydoc Parameters sections
autodoc_default_options = {"members": False}
numpydoc_show_class_members = False
numpydoc_xref_param_type = False
numpydoc_validation_checks: set[str] = set()  # tests/test_docs.py runs the validation

sphinx_gallery_conf = {
    "examples_dirs": "examples",
    "gallery_dirs": "auto_examples",
    "filename_pattern": r"/plot_",
    "within_subsection_order": "FileNameSortKey",
    "download_all_examples": False,
    "remove_config_comments": True,
    "plot_gallery": os.environ.get("FSDASK_DOCS_GALLERY", "True"),
    "abort_on_example_error": True,
    "only_warn_on_example_error": False,
    "show_memory": False,
}

html_theme = "pydata_sphinx_theme"
html_title = f"fsdask {release}"
html_static_path: list[str] = []
html_theme_options = {
    "navigation_with_keys": False,
    "show_toc_level": 2,
    "footer_start": ["copyright"],
    "footer_end": ["sphinx-version"],
    # wide tables: no "on this page" column beside them
    "secondary_sidebar_items": {
        "**": ["page-toc"],
        "user_guide/choosing": [],
        "user_guide/reproducing": [],
    },
}
html_sidebars = {"index": [], "changes": []}
html_show_sourcelink = False
copybutton_prompt_text = r"\$ |>>> |\.\.\. "
copybutton_prompt_is_regexp = True
