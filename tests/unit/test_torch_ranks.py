"""Two torch ranks over gloo train one model: different batches, the same weights after every step, and
the units of a window counted over both ranks."""

from __future__ import annotations

import os

import pytest

torch = pytest.importorskip("torch")
mp = pytest.importorskip("torch.multiprocessing")

JOB = {
    "model": {"name": "resnet_cifar", "depth": 8, "batch_size": 2, "image_size": 32},
    "devices": 2,
    "device": "cpu",
    "threads": 1,
}


def _rank(rank: int, port: int, out: dict) -> None:
    import torch.distributed as dist

    from dlbench.backends.torch.bench import TorchBench
    from dlbench.backends.torch.ranks import for_rank, rank_env
    from dlbench.config import JobConfig

    os.environ.update(rank_env(rank, 2, port))
    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=2)
    try:
        job = JobConfig.from_dict(JOB)
        for_rank(job, rank)
        bench = TorchBench(job)
        first = bench.source.next().inputs[0].sum().item()
        units0 = bench.units()
        for _ in range(3):
            bench.step()
        bench.sync()
        units = bench.units() - units0
        flat = torch.cat([p.detach().flatten() for p in bench.model.parameters()])
        every = [torch.zeros_like(flat) for _ in range(2)]
        dist.all_gather(every, flat)
        out[rank] = (first, units, torch.equal(every[0], every[1]))
        bench.close()
    finally:
        dist.destroy_process_group()


def test_two_ranks_see_their_own_batch_keep_the_same_weights_and_sum_their_units():
    from dlbench.backends.torch.ranks import free_port

    with mp.Manager() as manager:
        out = manager.dict()
        mp.spawn(_rank, args=(free_port(), out), nprocs=2, join=True)
        got = dict(out)
    (first0, units0, same0), (first1, units1, same1) = got[0], got[1]
    assert first0 != first1  # each rank its own synthetic batch
    assert same0 and same1  # DistributedDataParallel kept the weights equal
    assert units0 == units1 == 2 * 3 * 2  # 2 ranks x 3 steps x batch 2, counted once for the job
