"""Data-parallel ranks of one job, PyTorch's way: torch.distributed over env:// rendezvous.

The worker the orchestrator started is rank 0. It starts ranks 1..N-1 as more workers of the same entry
(`python -m dlbench.worker --rank r`), in its own process group, so the orchestrator's kill of that group
(timeout, Ctrl-C, SIGTERM) ends them all, and each asks Linux to kill it when rank 0 dies. Every rank runs
the same job code: the collectives (DistributedDataParallel's gradient all-reduce, the unit counts and
barriers at the window edges, TorchBench) meet because the calls are the same; only rank 0 has the
events pipe. Backend gloo on the CPU, nccl on CUDA (NVLink multicast left off).

Rank 0 watches the ranks it started: one that exits with an error before the job is over (a failed import,
its device out of memory) would otherwise leave rank 0 waiting in the rendezvous or a collective until the
job's timeout. The watcher reports it through `on_rank_death` at once, which ends the job.
"""

from __future__ import annotations

import datetime
import math
import os
import socket
import subprocess
import sys
import threading
from collections.abc import Callable
from typing import Any

import torch
import torch.distributed as dist

from dlbench.config import JobConfig

# NVLink SHARP / multicast stays off: it needs fabric setup that a shared host may not have.
NCCL_ENV = {"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1", "NVSHMEM_DISABLE_NVLS": "1"}
RANK_ARG = "--rank"  # in a rank's command line: what tells a rank process apart (and finds it)
JOIN_TIMEOUT_S = 30.0  # what rank 0 waits for the other ranks to exit after the job
WATCH_EVERY_S = 0.2  # how often rank 0 looks at the ranks it started


def free_port() -> int:
    """A TCP port free on the loopback now, for the rendezvous (MASTER_PORT)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def backend_for(job: JobConfig) -> str:
    """gloo on the CPU, nccl on CUDA (device=auto: CUDA when torch sees a GPU, as pick_device decides)."""
    cuda = job.device == "cuda" or (job.device == "auto" and torch.cuda.is_available())
    return "nccl" if cuda else "gloo"


def rank_env(rank: int, world: int, port: int) -> dict[str, str]:
    """What torch.distributed's env:// rendezvous reads, plus NCCL's settings (harmless under gloo)."""
    return {
        "MASTER_ADDR": "127.0.0.1",
        "MASTER_PORT": str(port),
        "RANK": str(rank),
        "LOCAL_RANK": str(rank),
        "WORLD_SIZE": str(world),
        **NCCL_ENV,
    }


def for_rank(job: JobConfig, rank: int) -> None:
    """Each rank its own data: its shard of a real dataset and its own synthetic batch (the seed)."""
    job.data.shard_id, job.data.num_shards = rank, job.devices


class RankGroup:
    """This process's place in the job's process group; rank 0 also holds the other ranks' processes."""

    def __init__(self, rank: int, world: int, backend: str, procs: list[subprocess.Popen]) -> None:
        self.rank, self.world, self.backend, self.procs = rank, world, backend, procs
        self.facts: dict[str, Any] = {}
        self._closing = threading.Event()

    @classmethod
    def join(
        cls,
        job: JobConfig,
        rank: int,
        job_file: str | None,
        threads: dict[str, int],
        on_rank_death: Callable[[int, int], None] | None = None,
    ) -> RankGroup:
        """Rank 0: start the other ranks, watch them (`on_rank_death(rank, returncode)` when one exits with
        an error before `close`), then rendezvous; another rank: rendezvous with the env rank 0 gave it.
        Returns once every rank is in the group, with what each rank got (`facts`)."""
        world, backend = job.devices, backend_for(job)
        procs: list[subprocess.Popen] = []
        if rank == 0:
            if job_file is None:
                raise ValueError("devices>1: rank 0 needs the job file to start the other ranks")
            port = free_port()
            os.environ.update(rank_env(0, world, port))
            procs = [_start_rank(r, world, port, job_file) for r in range(1, world)]
        for_rank(job, rank)
        group = cls(rank, world, backend, procs)
        if procs and on_rank_death is not None:
            group.watch(on_rank_death)
        try:
            timeout = datetime.timedelta(seconds=max(60.0, job.timeout_s))
            dist.init_process_group(backend, rank=rank, world_size=world, timeout=timeout)
            group.facts = group._gather_facts(threads)
        except BaseException:
            group.close()
            raise
        return group

    def agree(self, value: int) -> int:
        """One value for every rank, each having measured its own (schedule.min_timed_s: the steps per
        window): the mean of theirs, rounded up the same way everywhere."""
        return math.ceil(all_reduce_sum(value) / self.world)

    def _gather_facts(self, threads: dict[str, int]) -> dict[str, Any]:
        """Backend, world size and the threads each rank's torch reports (intra/inter-op), rank by rank."""
        mine = f"{threads.get('intra_op', '?')}/{threads.get('inter_op', '?')}"
        every: list[Any] = [None] * self.world
        dist.all_gather_object(every, mine)
        return {"backend": self.backend, "world_size": self.world, "rank_threads": ",".join(every)}

    def watch(self, on_rank_death: Callable[[int, int], None]) -> None:
        """A daemon thread that, for the first started rank seen to exit with an error while the job runs
        (not once `close` has begun: ranks then exit on their own), kills the other started ranks and calls
        `on_rank_death(rank, returncode)`."""

        def look() -> None:
            while not self._closing.wait(WATCH_EVERY_S):
                for rank, proc in enumerate(self.procs, start=1):
                    code = proc.poll()
                    if code not in (None, 0) and not self._closing.is_set():
                        self.kill_ranks()
                        on_rank_death(rank, code)
                        return

        threading.Thread(target=look, name="dlbench-rank-watch", daemon=True).start()

    def kill_ranks(self) -> None:
        """SIGKILL every started rank still running (after one of them failed, the job ends)."""
        for proc in self.procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()

    def close(self) -> None:
        """Leave the group; rank 0 then waits for the other ranks and kills any that do not exit."""
        self._closing.set()
        if dist.is_initialized():
            dist.destroy_process_group()
        for proc in self.procs:
            try:
                proc.wait(timeout=JOIN_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def _start_rank(rank: int, world: int, port: int, job_file: str) -> subprocess.Popen:
    """Rank `rank` as another worker of the same interpreter and job; same session and process group
    (no start_new_session), its output into rank 0's log (the job's worker.log)."""
    cmd = [
        sys.executable,
        "-m",
        "dlbench.worker",
        "--job",
        job_file,
        "--events-fd",
        "-1",
        RANK_ARG,
        str(rank),
    ]
    env = dict(os.environ) | rank_env(rank, world, port)
    return subprocess.Popen(cmd, stdin=subprocess.DEVNULL, env=env)


def all_reduce_sum(value: float) -> float:
    """The sum of `value` over the ranks (a collective: every rank calls it at the same point)."""
    device = "cuda" if dist.get_backend() == "nccl" else "cpu"
    t = torch.tensor([float(value)], dtype=torch.float64, device=device)
    dist.all_reduce(t)
    return float(t.item())


def barrier() -> None:
    dist.barrier()


def active() -> bool:
    return dist.is_available() and dist.is_initialized()
