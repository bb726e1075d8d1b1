"""The real ``distributed`` clusters the tests start: two one-thread worker processes.

``two_workers(memory_limit)`` is the one set-up behind the session's shared cluster
(tests/conftest.py) and the clusters of their own that tests need: a smaller memory limit, or
a worker they kill.
"""

from __future__ import annotations

import contextlib
from typing import Iterator


@contextlib.contextmanager
def two_workers(memory_limit: str, *, tolerate_slow_close: bool = False) -> Iterator:
    """A ``LocalCluster`` of 2 worker processes of one thread each under ``memory_limit``;
    yields its ``Client`` (never made the default one).

    ``tolerate_slow_close``: a cluster that does not close within 60 s (a busy box, after
    workers were killed) is left to end at exit instead of erroring the test's teardown.
    """
    from distributed import Client, LocalCluster

    from fsdask.cluster import quiet_distributed

    quiet_distributed()
    cluster = LocalCluster(
        n_workers=2,
        threads_per_worker=1,
        processes=True,
        dashboard_address=":0",
        memory_limit=memory_limit,
    )
    client = Client(cluster, set_as_default=False)
    try:
        yield client
    finally:
        client.close()
        if not tolerate_slow_close:
            cluster.close()
        else:
            try:
                cluster.close(timeout=60)
            except TimeoutError:  # the nannies end at exit
                pass
