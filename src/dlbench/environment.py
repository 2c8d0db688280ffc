"""Facts about the machine and the code that a result depends on (tags and environment.json)."""

from __future__ import annotations

import functools
import os
import platform
import socket
import subprocess
import sys

import psutil

from dlbench.backends.threads import available_cpus
from dlbench.core.cpu import cpu_model
from dlbench.core.names import HOST_PREFIX, PROJECT_ROOT
from dlbench.core.secrets import is_secret_name, mask

# Environment variables that change what a framework does (threads, devices, allocators, logging).
ENV_PREFIXES = (
    "OMP_",
    "MKL_",
    "KMP_",
    "MXNET_",
    "TF_",
    "XLA_",
    "CUDA_",
    "NCCL_",
    "DALI_",
    "TORCH",
    "PYTORCH_",
)


@functools.cache
def git_commit() -> str:
    """HEAD of the project checkout, with '+dirty' when the tree has changes; 'unknown' outside git."""
    try:
        head = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=5
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"],
            cwd=PROJECT_ROOT,
            capture_output=True,
            text=True,
            timeout=5,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return (head + ("+dirty" if dirty else "")) if head else "unknown"


def cpu_facts() -> dict[str, str]:
    """The CPU part of the hardware a run measures on (the host.cpu and host.cpu_count tags): its model and
    the CPUs this process may run on (taskset, cgroups, SLURM), which the job's threads follow."""
    return {
        "cpu": cpu_model() or platform.processor() or platform.machine(),
        "cpu_count": str(available_cpus()),
    }


def host_facts() -> dict[str, str]:
    mem = psutil.virtual_memory().total
    return {
        "host": socket.gethostname(),
        "os": platform.platform(),
        **cpu_facts(),
        "cpu_total": str(os.cpu_count()),  # the machine's total beside the CPUs this process may use
        "mem_total_gib": f"{mem / 2**30:.1f}",
        "python": sys.version.split()[0],
        "cuda_visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES", "(all)"),
        "git_commit": git_commit(),
    }


def host_tags() -> dict[str, str]:
    """host_facts as a run's tags (host.<fact>), the names report/load.py reads back."""
    return {HOST_PREFIX + k: v for k, v in host_facts().items()}


def cpu_tags() -> dict[str, str]:
    """cpu_facts as tags: the CPU half of the hardware key resume matches on, without host_facts' git calls."""
    return {HOST_PREFIX + k: v for k, v in cpu_facts().items()}


def framework_env() -> dict[str, str]:
    """The variables a result may depend on (ENV_PREFIXES), for environment.json. A variable whose name
    looks like a secret (*TOKEN*, *SECRET*, *PASSWORD*, *_KEY) is never recorded; values are masked."""
    return {
        k: mask(v)
        for k, v in sorted(os.environ.items())
        if k.startswith(ENV_PREFIXES) and not is_secret_name(k)
    }
