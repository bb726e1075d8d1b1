"""Dask worker preload for tests: the worker process exits as soon as it starts a task.

Used to make a crash loop that neither a memory limit nor timing decides: every worker
registers normally, then dies on its first task, and its nanny restarts it.
"""

import os

from distributed.diagnostics.plugin import WorkerPlugin


class _DieOnFirstTask(WorkerPlugin):
    def transition(self, key, start, finish, **kwargs):
        if finish == "executing":
            os._exit(3)


async def dask_setup(worker):
    await worker.plugin_add(_DieOnFirstTask(), name="die-on-first-task")
