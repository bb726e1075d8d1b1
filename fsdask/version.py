"""The version of fsdask, in a module of its own: it imports nothing, so any module (and the
packaging metadata, ``pyproject.toml``) can read it without importing the package."""

#: the release (PEP 440); ``fsdask.__version__`` and ``fsdask --version`` show it
VERSION = "0.1.0"


def current() -> str:
    """The version fsdask reports now: ``fsdask.__version__`` as users (and tests) see it
    once the package is loaded, else :data:`VERSION`; read without importing the package."""
    import sys

    package = sys.modules.get("fsdask")
    return str(getattr(package, "__version__", VERSION))
