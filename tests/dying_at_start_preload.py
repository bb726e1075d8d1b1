"""Dask worker preload for tests: a worker process dies while it starts.

The first worker process to load it (the one that creates ``$FSDASK_TEST_DIE_MARKER``) exits
in its set-up, before it registers with the scheduler: a worker lost while the cluster is
still starting.  Every later worker starts normally.  Without the variable every worker dies.
"""

import os


async def dask_setup(worker):
    marker = os.environ.get("FSDASK_TEST_DIE_MARKER")
    if marker:
        try:
            fd = os.open(marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
        except FileExistsError:
            return
        os.close(fd)
    os._exit(3)
