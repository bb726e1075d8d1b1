"""The version of fsdask, in a module of its own: it imports nothing, so any module (and the
packaging metadata, ``pyproject.toml``) can read it without importing the package."""

#: the release (PEP 440); ``fsdask.__version__`` and ``fsdask --version`` show it
VERSION = "0.1.0"
