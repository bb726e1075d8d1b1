"""benchmarks/scaling_model.py: the model's arithmetic (no cluster, no timing)."""

import dataclasses
import math
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))

import scaling_model as sm  # noqa: E402

BASE = sm.Profile(
    n=100,
    p=1000,
    blocks=4,
    graphs=2,
    tasks=10,
    reads=8,
    task_seconds=4.0,
    worker_cpu=4.0,
    io_seconds=2.0,
    client_seconds=0.5,
    client_bytes=0,
    scheduler_bytes=0,
    result_bytes=0,
)
FREE = {"per_task": 0.0, "per_graph": 0.0}


def test_docstring_example():
    cluster = sm.Cluster(workers=2, cores=2, per_task=0.01, per_graph=0.1)
    # worker 4 s / 2; scheduler 10 × 0.01 + 2 × 0.1; client 0.5
    assert sm.predict(BASE, cluster).wall == pytest.approx(2.0 + 0.3 + 0.5)


def test_workers_split_the_task_time_up_to_the_blocks():
    walls = [sm.predict(BASE, sm.Cluster(w, cores=64, **FREE)).worker for w in (1, 2, 4, 8)]
    assert walls == [4.0, 2.0, 1.0, 1.0]  # 4 blocks: a fifth worker has nothing to do


def test_more_workers_than_cores_are_bound_by_the_cores():
    # 4 one-thread workers on a 2-core machine: the CPU seconds over 2 cores
    assert sm.predict(BASE, sm.Cluster(4, cores=2, **FREE)).worker == 2.0
    # tasks that keep 2 cores busy each (BLAS threads) gain nothing from a second worker there
    busy = dataclasses.replace(BASE, worker_cpu=8.0)
    assert sm.predict(busy, sm.Cluster(2, cores=2, **FREE)).worker == 4.0


def test_waves_round_up_a_partial_last_round():
    assert sm.waves(4, 8) == 1.0
    assert sm.waves(8, 4) == 1.0
    assert sm.waves(5, 4) == pytest.approx(2 / (5 / 4))
    many = dataclasses.replace(BASE, blocks=5, task_seconds=5.0, worker_cpu=5.0)
    assert sm.predict(many, sm.Cluster(4, cores=64, **FREE)).worker == pytest.approx(2.0)


def test_storage_and_compute_overlap_the_slower_one_counts():
    # X: 100 × 1000 × 4 = 4e5 bytes, read twice (8 reads / 4 blocks)
    assert BASE.x_bytes == 4e5 and BASE.x_reads == 2
    slow = sm.Cluster(1, cores=1, storage=1e5, **FREE)
    r = sm.predict(BASE, slow)
    assert r.storage == pytest.approx(8.0)
    assert r.wall == pytest.approx(8.0 + 0.5)  # max(4 s of tasks, 8 s of reads) + client
    assert r.bottleneck == "object storage"
    # many nodes: the object store's bandwidth, not the sum of the NICs, is the limit
    wide = sm.Cluster(1, cores=1, nodes=100, nic=1e4, storage=1e5, **FREE)
    assert sm.predict(BASE, wide).storage == pytest.approx(8.0)
    narrow = sm.Cluster(1, cores=1, nodes=2, nic=1e4, storage=1e5, **FREE)
    assert sm.predict(BASE, narrow).storage == pytest.approx(8e5 / 2e4)


def test_scheduler_and_client_terms_and_the_bottleneck():
    r = sm.predict(BASE, sm.Cluster(4, cores=4, per_task=1.0, per_graph=0.5))
    assert r.scheduler == 10 * 1.0 + 2 * 0.5
    assert r.bottleneck == "scheduler"
    lonely = dataclasses.replace(BASE, client_seconds=100.0)
    assert sm.predict(lonely, sm.Cluster(4, cores=4, **FREE)).bottleneck == "client"


def test_the_workers_share_their_part_of_the_task_overhead():
    # o = 0.1 s, of which the scheduler's o_s = 0.02 s (one task at a time); 10 tasks
    split = {"per_task": 0.1, "per_graph": 0.0, "scheduler_per_task": 0.02}
    one = sm.predict(BASE, sm.Cluster(1, cores=64, **split))
    assert one.wall == sm.predict(BASE, sm.Cluster(1, cores=64, per_task=0.1, per_graph=0.0)).wall
    four = sm.predict(BASE, sm.Cluster(4, cores=64, **split))
    assert four.worker == pytest.approx((4.0 + 10 * 0.08) / 4)
    assert four.scheduler == pytest.approx(10 * 0.02)
    # 4 one-thread workers on 2 cores run 2 tasks at a time
    assert sm.predict(BASE, sm.Cluster(4, cores=2, **split)).worker == pytest.approx(4.8 / 2)
    # on one 2-core machine the scheduler's CPU competes with the workers'
    busy = dataclasses.replace(BASE, worker_cpu=6.0)
    alone = sm.predict(busy, sm.Cluster(4, cores=2, **split))
    shared = sm.predict(busy, sm.Cluster(4, cores=2, shared=True, **split))
    assert alone.worker == pytest.approx(6.0 / 2)
    assert shared.worker == pytest.approx((6.0 + 10 * 0.02) / 2)


def test_given_their_cpu_per_task_the_workers_pay_only_it():
    # o = 0.1 s, o_s = 0.02 s, o_w = 0.03 s: the other 0.05 s is latency a queued task hides
    cl = sm.Cluster(1, cores=64, per_task=0.1, per_graph=0.0, scheduler_per_task=0.02)
    hidden = dataclasses.replace(cl, worker_per_task=0.03)
    assert sm.predict(BASE, cl).worker == pytest.approx(4.0 + 10 * 0.08)
    assert sm.predict(BASE, hidden).worker == pytest.approx(4.0 + 10 * 0.03)


def test_overheads_make_the_cluster_that_pays_them():
    """The validation and the projection build their clusters from the measured overheads
    through one door: every overhead is carried, the other fields are the caller's."""
    over = sm.Overheads(0.003, 0.007, 0.002, 0.0008, 0.001, (1.1, 1.2))
    cl = over.cluster(64, 32, nodes=2, storage=5e9, shared=True)
    assert cl == sm.Cluster(
        64,
        32,
        per_task=0.003,
        per_graph=0.007,
        scheduler_per_task=0.0008,
        worker_per_task=0.001,
        contention=(1.1, 1.2),
        nodes=2,
        storage=5e9,
        shared=True,
    )


def test_contention_slows_io_and_compute_only_when_every_core_is_busy():
    # BASE: 4 s of tasks, 2 s of them I/O, on 4 blocks
    slow = {"contention": (1.5, 1.25), **FREE}
    assert sm.contended(BASE, sm.Cluster(2, cores=2, **slow)) == pytest.approx(2 * 1.5 + 2 * 1.25)
    assert sm.contended(BASE, sm.Cluster(1, cores=2, **slow)) == 4.0  # a core to spare
    assert sm.contended(BASE, sm.Cluster(8, cores=8, **slow)) == 4.0  # 4 blocks: 4 cores idle
    r = sm.predict(BASE, sm.Cluster(2, cores=2, **slow))
    assert r.worker == pytest.approx(5.5 / 2)


def test_transfers_between_workers_need_more_than_one():
    moving = dataclasses.replace(BASE, result_bytes=1e6, client_bytes=1e3)
    one = sm.predict(moving, sm.Cluster(1, cores=1, nic=1e3, **FREE))
    assert one.transfer == pytest.approx(1.0)  # only the client's bytes
    four = sm.predict(moving, sm.Cluster(4, cores=4, nodes=4, nic=1e3, **FREE))
    assert four.transfer == pytest.approx(1e6 * 0.75 / 4e3 + 1.0)
    # loopback (no NIC given): nothing to pay
    assert sm.predict(moving, sm.Cluster(4, cores=4, **FREE)).transfer == 0.0


def test_line_through_never_goes_negative():
    assert sm.line_through(1, 3.0, 3, 7.0) == (1.0, 2.0)
    assert sm.line_through(1, 5.0, 2, 4.0) == (4.0, 0.0)  # noise: no negative slope
    assert sm.line_through(1, 1.0, 2, 5.0) == (0.0, 4.0)  # nor a negative intercept
    assert sm.line_through(2, 1.0, 2, 5.0) == (5.0, 0.0)


def _linear(p: int, blocks: int, n: int = 100) -> sm.Profile:
    """A profile whose every quantity is an exact line in blocks (or in p)."""
    return dataclasses.replace(
        BASE,
        n=n,
        p=p,
        blocks=blocks,
        graphs=3,
        tasks=5 + 10 * blocks,
        reads=2 * blocks,
        task_seconds=0.5 + 0.25 * blocks,
        worker_cpu=0.5 + 0.25 * blocks,
        io_seconds=0.1 * blocks,
        client_seconds=0.2 + 1e-3 * p,
        client_bytes=8.0 * p,
        scheduler_bytes=100 + 1000 * blocks,
        result_bytes=50 * blocks,
    )


def test_extrapolation_follows_exact_lines():
    small, big = _linear(1000, 4), _linear(2000, 8)  # 250 features per block
    block_bytes = 100 * 250 * 4
    far = sm.extrapolate(small, big, n=100, p=1_000_000, block_bytes=block_bytes)
    want = _linear(1_000_000, 4000)
    for field in dataclasses.fields(sm.Profile):
        assert getattr(far, field.name) == pytest.approx(getattr(want, field.name)), field.name


def test_extrapolation_scales_a_blocks_work_by_its_elements():
    small, big = _linear(1000, 4), _linear(2000, 8)
    # 2 × the samples in blocks of the same bytes: half the width, the same elements per block
    same = sm.extrapolate(small, big, n=200, p=2000, block_bytes=100 * 250 * 4)
    assert same.blocks == 16
    assert same.task_seconds == pytest.approx(0.5 + 0.25 * 16)
    # blocks of 4 × the bytes at the same n: 4 × the work per block, a quarter of the blocks
    wide = sm.extrapolate(small, big, n=100, p=8000, block_bytes=4 * 100 * 250 * 4)
    assert wide.blocks == 8
    assert wide.task_seconds == pytest.approx(0.5 + 0.25 * 8 * 4)
    assert wide.tasks == 5 + 10 * 8  # tasks follow the blocks, not their size
    assert wide.client_seconds == pytest.approx(0.2 + 8.0)  # the client follows p


def test_a_factor_with_a_row_per_sample_grows_with_n_on_the_client():
    small, big = _linear(1000, 4), _linear(2000, 8)  # 8 bytes per feature: one value
    assert sm.rows_per_feature(big) == pytest.approx(1)
    stats = sm.extrapolate(small, big, n=200, p=2000, block_bytes=100 * 250 * 4)
    assert stats.client_bytes == pytest.approx(8.0 * 2000)  # per-feature statistics: p only
    # the client receives n = 100 float64 values per feature (an r × p factor)
    small, big = (dataclasses.replace(x, client_bytes=100 * 8.0 * x.p) for x in (small, big))
    assert sm.rows_per_feature(big) == pytest.approx(100)
    wide = sm.extrapolate(small, big, n=200, p=2000, block_bytes=100 * 250 * 4)
    assert wide.client_bytes == pytest.approx(200 * 8.0 * 2000)
    assert wide.client_seconds == pytest.approx(0.2 + 1e-3 * 2000 * 2)


def test_target_blocks_of_the_projection():
    t = sm.TARGET
    width = t["block_bytes"] // (t["n"] * t["itemsize"])
    assert width == 1677
    assert math.ceil(t["p"] / width) == 5964


def test_error_is_relative_to_the_measurement():
    assert sm.error(1.25, 1.0) == pytest.approx(0.25)
    assert sm.error(0.8, 1.0) == pytest.approx(-0.2)


@pytest.mark.cluster
def test_the_scheduler_counts_graphs_tasks_and_reads():
    # the counts a profile is made of, on a real (threaded) cluster: every graph, every task,
    # and the tasks that read X told from the others by their key prefix
    import dask.array as da
    import numpy as np
    from distributed import Client, LocalCluster, futures_of

    X = da.from_array(np.ones((10, 40)), chunks=(10, 10), name="fsdask-X-test")
    with (
        LocalCluster(
            n_workers=1, threads_per_worker=1, processes=False, dashboard_address=":0"
        ) as cluster,
        Client(cluster, set_as_default=False) as client,
    ):
        cluster.scheduler.add_plugin(sm.task_counter())
        one = sm.measure(client, lambda: X.sum(axis=0).compute(), "fsdask-X")
        two = sm.measure(client, lambda: (X.sum().compute(), X.max().compute()), "fsdask-X")
        held = client.persist(X)
        client.gather(futures_of(held))  # read before the measured run
        none = sm.measure(client, lambda: held.sum().compute(), "fsdask-X")
    assert one["graphs"] == 1 and two["graphs"] == 2, (one, two)
    assert one["reads"] == 4 and two["reads"] == 8, (one["prefixes"], two["prefixes"])
    assert one["tasks"] > one["reads"]  # and the sums of the blocks
    assert none["reads"] == 0 and none["tasks"] > 0, none["prefixes"]
    for run in (one, two, none):
        assert 0 <= run["outside_seconds"] <= run["time"]
        assert run["task_seconds"] <= run["time"]
        assert run["result_bytes"] > 0
