"""Checkpoints inside iterative fits: a killed fit resumes where it stopped.

An iterative method (Q-α, Logo, …) saves the small state its next iteration needs (O(p)
vectors and small matrices, never X) to one file every N iterations or T seconds; a fit
started again with the same data, options and fsdask version continues from it and gives
the same result as an uninterrupted fit.  Nothing changes for ordinary use: checkpointing
is switched on for the fits run inside :func:`checkpointing` (``fsdask select
--checkpoint-every``), not by an estimator parameter, because it is an execution concern
like the scheduler — it does not change what is computed, so it stays out of
``get_params`` (and out of ``clone``, grid searches and the checkpoint's own key)::

    with fsdask.checkpoint.checkpointing("run.fsdask-checkpoint", every="60s"):
        QAlpha(k=2).fit(ds)            # killed? run the same lines again to continue

The file is a NumPy ``.npz`` (no pickles) with a JSON header holding the key: the method,
its parameters, the fsdask version, and the data — the dask name of X (for a store opened by
:func:`fsdask.open_dataset` it is derived from the store's content fingerprint; for a NumPy
array from its bytes), its shape, chunks and dtype, and a digest of y.  A checkpoint whose
key differs is refused, never silently reused.  Writes are atomic (temporary file, fsync,
``os.replace``), so a kill leaves the previous checkpoint or the new one, never half of one.

A fit may hold several *slots* (one per restart of Q-α's ``n_init``, per λ of a path, …);
each slot keeps its own iteration and state, and a finished slot is restored as finished.
"""

from __future__ import annotations

import contextlib
import contextvars
import dataclasses
import hashlib
import io
import json
import os
import re
import time
import zipfile
from typing import Any, Callable, Iterator

import numpy as np

from fsdask.errors import InputError, ParameterError

FORMAT = 1
_HEADER = "__header__"
_SETTINGS: contextvars.ContextVar[Settings | None] = contextvars.ContextVar(
    "fsdask_checkpoint", default=None
)


# --------------------------------------------------------------------------- settings
def parse_every(every: Any) -> tuple[int | None, float | None]:
    """``5`` / ``"5"`` → every 5 iterations; ``"60s"``, ``"2m"``, ``"1h"`` → every T seconds."""
    text = str(every).strip().lower()
    m = re.fullmatch(r"(\d+(?:\.\d+)?)\s*(s|sec|m|min|h)", text)
    if m:
        seconds = float(m.group(1)) * {"s": 1, "sec": 1, "m": 60, "min": 60, "h": 3600}[m.group(2)]
        if seconds > 0:
            return None, seconds
    elif re.fullmatch(r"\d+", text) and int(text) >= 1 and not isinstance(every, bool):
        return int(text), None
    raise ParameterError(
        f"checkpoint every={every!r} (--checkpoint-every): use a number of iterations (5) or a time (60s, 10m, 1h)"
    )


@dataclasses.dataclass
class Settings:
    path: str
    every_iter: int | None
    every_s: float | None
    resume: bool
    opened: Checkpoint | None = None


@contextlib.contextmanager
def checkpointing(
    path: str | os.PathLike, every: Any = "60s", *, resume: bool = True
) -> Iterator[Settings]:
    """Checkpoint the iterative fits run inside this block to ``path``.

    Use one block per fit.  Q-α, Logo, SparseHSIC, CPFS and Jolliffe I save their state
    (never X) atomically; the checkpoint is removed once ``fsdask select`` publishes its
    result.

    Parameters
    ----------
    path : str or path-like
        The checkpoint file.
    every : int or str, default "60s"
        Save every this many iterations (``5``) or this often (``"60s"``, ``"10m"``).
    resume : bool, default True
        Continue from a checkpoint at ``path`` when there is one (one written for other
        data, options or fsdask version is refused); False ignores it and overwrites it.

    Yields
    ------
    Settings
        The settings in force inside the block.

    Examples
    --------
    >>> import fsdask
    >>> from fsdask.checkpoint import checkpointing
    >>> from fsdask.datasets import qalpha_clusters
    >>> X = qalpha_clusters(n_clusters=3).dataset["X"].values
    >>> with checkpointing("qalpha.fsdask-checkpoint", every=10):
    ...     sel = fsdask.QAlpha(k=3).fit(X)
    >>> sel.converged_
    True
    """
    n, s = parse_every(every)
    token = _SETTINGS.set(Settings(os.fspath(path), n, s, bool(resume)))
    try:
        yield _SETTINGS.get()
    finally:
        _SETTINGS.reset(token)


# --------------------------------------------------------------------------- keys
def _jsonable(value: Any) -> Any:
    """Parameters as stable JSON: arrays by digest, callables and objects by qualified name."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, (np.integer, np.floating, np.bool_)):
        return value.item()
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in sorted(value.items(), key=lambda kv: str(kv[0]))}
    if isinstance(value, np.ndarray):
        return {"array": digest(value)}
    if callable(value):
        return f"{getattr(value, '__module__', '?')}.{getattr(value, '__qualname__', type(value).__qualname__)}"
    return f"{type(value).__module__}.{type(value).__qualname__}"


def digest(a: Any) -> str:
    arr = np.ascontiguousarray(np.asarray(a))
    h = hashlib.blake2b(digest_size=16)
    h.update(f"{arr.dtype.str}{arr.shape}".encode())
    h.update(arr.tobytes() if arr.dtype.kind != "O" else repr(arr.tolist()).encode())
    return h.hexdigest()


def data_key(X: Any, y: Any = None) -> dict[str, Any]:
    """What identifies the data of a fit, without reading X (its dask name encodes the source)."""
    key: dict[str, Any] = {"shape": [int(s) for s in X.shape], "dtype": str(X.dtype)}
    if hasattr(X, "chunks") and hasattr(X, "name"):
        key["chunks"] = hashlib.blake2b(repr(X.chunks).encode(), digest_size=8).hexdigest()
        key["x"] = str(X.name)
    else:
        key["x"] = digest(X)
    key["y"] = None if y is None else digest(y)
    return key


def fit_key(estimator: Any, X: Any, y: Any = None) -> dict[str, Any]:
    from fsdask.version import current

    return {
        "method": getattr(estimator, "method_name", type(estimator).__name__),
        "estimator": type(estimator).__name__,
        "params": _jsonable(estimator.get_params()),
        "fsdask_version": current(),
        "data": data_key(X, y),
    }


# --------------------------------------------------------------------------- the file
def _refuse(path: str, what: str, cls=ParameterError) -> Exception:
    return cls(
        f"checkpoint {path} {what}; remove it, or run with --restart (resume=False) to ignore "
        "and overwrite it"
    )


def read(path: str) -> tuple[dict, dict[str, np.ndarray]]:
    """(header, arrays) of the checkpoint at ``path``; a clear InputError if it is damaged."""
    try:
        with np.load(path, allow_pickle=False) as z:
            header = json.loads(bytes(z[_HEADER]).decode("utf-8"))
            arrays = {k: z[k] for k in z.files if k != _HEADER}
    except FileNotFoundError:
        raise
    except (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile, UnicodeDecodeError) as exc:
        raise _refuse(
            path, f"is corrupted or truncated ({type(exc).__name__})", InputError
        ) from None
    if not isinstance(header, dict) or header.get("format") != FORMAT or "slots" not in header:
        raise _refuse(path, "is not an fsdask checkpoint of this format", InputError)
    return header, arrays


def peek(path: str) -> dict[str, int]:
    """{slot: iteration} of the checkpoint at ``path`` (for tests and progress displays)."""
    header, _ = read(path)
    return {name: s["iteration"] for name, s in header["slots"].items()}


def _write(path: str, header: dict, arrays: dict[str, np.ndarray]) -> None:
    buf = io.BytesIO()
    np.savez(
        buf,
        **{_HEADER: np.frombuffer(json.dumps(header).encode("utf-8"), dtype=np.uint8)},
        **arrays,
    )
    tmp = f"{path}.tmp-{os.getpid()}"
    try:
        with open(tmp, "wb") as fh:
            fh.write(buf.getbuffer())
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except OSError as exc:
        with contextlib.suppress(OSError):
            os.remove(tmp)
        raise InputError(
            f"cannot write the checkpoint {path} ({exc.strerror or exc}); make its folder writable"
        ) from None


def _differs(old: dict, new: dict) -> str | None:
    if old.get("fsdask_version") != new["fsdask_version"]:
        return (
            f"was written by fsdask {old.get('fsdask_version')} (this is {new['fsdask_version']})"
        )
    if old.get("method") != new["method"] or old.get("estimator") != new["estimator"]:
        return f"is for the method {old.get('method')}, not {new['method']}"
    if old.get("data") != new["data"]:
        names = {
            "x": "the source or content of X",
            "shape": "its shape",
            "dtype": "its dtype",
            "chunks": "its chunks",
            "y": "the labels y",
        }
        what = [
            names.get(k, k) for k in new["data"] if (old.get("data") or {}).get(k) != new["data"][k]
        ]
        return f"was written for other data ({', '.join(what)} differ)"
    if old.get("params") != new["params"]:
        p0, p1 = old.get("params") or {}, new["params"]
        what = [
            f"{k}: {p0.get(k)!r} → {p1.get(k)!r}"
            for k in sorted(set(p0) | set(p1))
            if p0.get(k) != p1.get(k)
        ]
        return f"was written with other options ({'; '.join(what)})"
    return None


class Checkpoint:
    """The checkpoint of one fit: slots of (iteration, state) saved together to one file."""

    def __init__(self, settings: Settings, key: dict):
        self.settings = settings
        self.path = settings.path
        self.key = key
        self.slots: dict[str, dict] = {}
        self.arrays: dict[str, np.ndarray] = {}
        self.resumed: dict[str, int] = {}
        if settings.resume and os.path.exists(self.path):
            header, arrays = read(self.path)
            why = _differs(header.get("key", {}), key)
            if why:
                raise _refuse(self.path, why, InputError if "data" in why else ParameterError)
            self.slots, self.arrays = header["slots"], arrays

    def slot(self, name: str) -> Slot:
        return Slot(self, name)

    def save(self) -> None:
        _write(self.path, {"format": FORMAT, "key": self.key, "slots": self.slots}, self.arrays)


class Slot:
    """One iterative loop's state in a :class:`Checkpoint`."""

    def __init__(self, ck: Checkpoint, name: str):
        self.ck, self.name = ck, name
        self.last_save = time.monotonic()
        self.last_iter = 0

    def restore(self) -> dict[str, Any] | None:
        """The saved state (``iteration`` and ``final`` included), or None to start from the beginning."""
        meta = self.ck.slots.get(self.name)
        if meta is None:
            return None
        state = dict(meta["values"])
        for k in meta["arrays"]:
            state[k] = self.ck.arrays[f"{self.name}/{k}"]
        state["iteration"], state["final"] = meta["iteration"], meta["final"]
        self.last_iter = meta["iteration"]
        if self.name not in self.ck.resumed:
            self.ck.resumed[self.name] = meta["iteration"]
            import logging

            logging.getLogger("fsdask").warning(
                "resuming %s from the checkpoint %s at iteration %d",
                self.name,
                self.ck.path,
                meta["iteration"],
            )
        return state

    def due(self, iteration: int) -> bool:
        s = self.ck.settings
        if s.every_iter is not None:
            return iteration - self.last_iter >= s.every_iter
        return time.monotonic() - self.last_save >= s.every_s

    def reached(
        self, iteration: int, state: Callable[[], dict[str, Any]], final: bool = False
    ) -> None:
        """Save ``state()`` for ``iteration`` when the cadence says so (always when ``final``)."""
        if not (final or self.due(iteration)):
            return
        values, arrays = {}, {}
        for k, v in state().items():
            if isinstance(v, np.ndarray):
                arrays[k] = v
            else:
                values[k] = _jsonable(v)
        for k in [k for k in self.ck.arrays if k.startswith(self.name + "/")]:
            del self.ck.arrays[k]
        self.ck.arrays.update({f"{self.name}/{k}": v for k, v in arrays.items()})
        self.ck.slots[self.name] = {
            "iteration": int(iteration),
            "final": bool(final),
            "values": values,
            "arrays": sorted(arrays),
        }
        self.ck.save()
        self.last_save, self.last_iter = time.monotonic(), iteration


class _NoSlot:
    """Stands in for a slot when no checkpointing is active: restores nothing, saves nothing."""

    def restore(self) -> None:
        return None

    def reached(self, iteration: int, state: Callable[[], dict], final: bool = False) -> None:
        return None


#: the slot of a loop that is not checkpointed (a default for functions that take a ``slot``)
NO_SLOT = _NoSlot()


class _NoCheckpoint:
    def slot(self, name: str) -> _NoSlot:
        return NO_SLOT


def for_fit(estimator: Any, X: Any, y: Any = None) -> Checkpoint | _NoCheckpoint:
    """The checkpoint of the fit of ``estimator`` on (X, y) in the active :func:`checkpointing`
    block (shared by every loop of that fit), or a stand-in that does nothing."""
    s = _SETTINGS.get()
    if s is None:
        return _NoCheckpoint()
    key = fit_key(estimator, X, y)
    if s.opened is None or s.opened.key != key:
        s.opened = Checkpoint(s, key)
    return s.opened


def rng_state(rng: np.random.Generator) -> str:
    """A Generator's exact state as JSON text (restored by :func:`set_rng_state`)."""
    return json.dumps(rng.bit_generator.state)


def set_rng_state(rng: np.random.Generator, text: str) -> None:
    rng.bit_generator.state = json.loads(text)
