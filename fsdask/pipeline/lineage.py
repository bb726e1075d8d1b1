"""OpenLineage-shaped run events of ``fsdask run``, one JSON object per line, next to the history.

Each run appends a ``START`` event once its config is read and a ``COMPLETE`` or ``FAIL``
event when it ends, to ``STATE-without-.json.lineage.jsonl``, in the shape of an
`OpenLineage <https://openlineage.io>`_ ``RunEvent`` so that a scheduler or a data catalog
can pick them up (the file is not sent anywhere):

* ``job``: namespace ``fsdask``, name the pipeline's config file;
* ``run``: ``runId`` (a UUID shared by the run's events) and the facets
  ``processing_engine`` (fsdask and its version), ``fsdask`` (the run id of the JSON log and
  history, ``--as-of``, and each step's command and options — the parameters, secrets
  redacted), and on ``FAIL`` ``errorMessage``;
* ``inputs`` / ``outputs``: every step's datasets and files, each ``{namespace, name}``
  (``file`` and the absolute path; ``s3://bucket`` and the key; an Icechunk repository and
  its group) with a ``version`` facet when the version is known: the snapshot id of an
  Icechunk input or of the commit that wrote an output, else the input's fingerprint.
"""

from __future__ import annotations

import datetime as _dt
import json
import os
import uuid
from typing import Any, Iterable, Mapping

from fsdask.errors import StoreError

PRODUCER = "https://github.com/fsdask/fsdask"
SCHEMA = "https://openlineage.io/spec/2-0-2/OpenLineage.json#/definitions/RunEvent"
FACET = "https://openlineage.io/spec/facets/1-0-1/{}.json"


def lineage_path(state_path: str) -> str:
    """The lineage file next to the state file: ``STATE`` without ``.json`` + ``.lineage.jsonl``."""
    base = state_path[: -len(".json")] if state_path.endswith(".json") else state_path
    return base + ".lineage.jsonl"


def dataset(url: str, version: str | None = None) -> dict:
    """An OpenLineage dataset: ``namespace`` and ``name`` of ``url``, and its ``version`` facet.

    Parameters
    ----------
    url : str
        A local path or a URL (``s3://…``, ``icechunk://…``).
    version : str, optional
        The version read or written (a snapshot id, a fingerprint).

    Returns
    -------
    dict
    """
    from fsdask.io.icechunk import IcechunkRef, is_icechunk_url
    from fsdask.io.location import safe_url

    if is_icechunk_url(url):
        ref = IcechunkRef.parse(url)
        namespace, name = ref.repository, ref.group or "/"
    elif "://" in str(url) and not str(url).startswith("file://"):
        scheme, rest = safe_url(url).split("://", 1)
        bucket, _, key = rest.partition("/")
        namespace, name = f"{scheme}://{bucket}", key
    else:
        namespace, name = "file", os.path.abspath(str(url).removeprefix("file://"))
    out: dict[str, Any] = {"namespace": namespace, "name": name, "facets": {}}
    if version:
        out["facets"]["version"] = {
            "_producer": PRODUCER,
            "_schemaURL": FACET.format("DatasetVersionDatasetFacet"),
            "datasetVersion": str(version),
        }
    return out


def version_of(fp: Mapping[str, Any] | None) -> str | None:
    """The version a fingerprint stands for: an Icechunk snapshot id, else its digest."""
    if not fp:
        return None
    for key in ("snapshot", "fingerprint", "hash", "digest", "etag"):
        if fp.get(key):
            return str(fp[key])
    return None


class Lineage:
    """The lineage events of one run.

    Parameters
    ----------
    path : str
        The ``.lineage.jsonl`` file (appended to).
    job : str
        The job's name (the pipeline's config file).
    run : str
        The run id of the JSON log and history (kept in the ``fsdask`` facet).
    """

    def __init__(self, path: str, job: str, run: str):
        self.path, self.job, self.run = path, job, run
        self.run_id = str(uuid.uuid4())

    def event(
        self,
        kind: str,
        *,
        inputs: Iterable[dict] = (),
        outputs: Iterable[dict] = (),
        facets: Mapping[str, Any] | None = None,
        error: str | None = None,
    ) -> dict:
        """Append one ``RunEvent`` of ``kind`` (``START``, ``COMPLETE``, ``FAIL``); return it."""
        from fsdask.version import current

        run_facets: dict[str, Any] = {
            "processing_engine": {
                "_producer": PRODUCER,
                "_schemaURL": FACET.format("ProcessingEngineRunFacet"),
                "name": "fsdask",
                "version": current(),
            },
            "fsdask": {"_producer": PRODUCER, "run": self.run, **dict(facets or {})},
        }
        if error is not None:
            run_facets["errorMessage"] = {
                "_producer": PRODUCER,
                "_schemaURL": FACET.format("ErrorMessageRunFacet"),
                "message": error,
                "programmingLanguage": "python",
            }
        event = {
            "eventType": kind,
            "eventTime": _dt.datetime.now(_dt.UTC).isoformat(timespec="milliseconds"),
            "producer": PRODUCER,
            "schemaURL": SCHEMA,
            "run": {"runId": self.run_id, "facets": run_facets},
            "job": {"namespace": "fsdask", "name": self.job, "facets": {}},
            "inputs": list(inputs),
            "outputs": list(outputs),
        }
        self.append(event)
        return event

    def append(self, event: Mapping[str, Any]) -> None:
        """One line, secrets redacted, flushed and synced."""
        from fsdask.io.secrets import redact

        line = redact(json.dumps(event, default=str, ensure_ascii=False)) + "\n"
        try:
            os.makedirs(os.path.dirname(os.path.abspath(self.path)), exist_ok=True)
            with open(self.path, "a", encoding="utf-8") as fh:
                fh.write(line)
                fh.flush()
                os.fsync(fh.fileno())
        except OSError as exc:
            raise StoreError(
                f"{self.path}: cannot append the lineage event ({exc.strerror or exc}); free "
                "space or make it writable, then run again"
            ) from None


def read_lineage(path: str) -> list[dict]:
    """All events of a lineage file (missing file → [])."""
    try:
        with open(path, encoding="utf-8") as fh:
            return [json.loads(line) for line in fh if line.strip()]
    except FileNotFoundError:
        return []
