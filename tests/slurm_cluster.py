"""A one-node SLURM cluster private to a test: Debian's munged, slurmctld and slurmd (apt-get install
slurm-wlm munge; .ci/run does), with their own key, socket, ports, state and spool under a tmp dir, so
hydra/launcher=submitit_slurm runs against the real scheduler. Needs root (slurmd starts jobs as their
user); skipped with the reason otherwise."""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

DAEMONS = ("/usr/sbin/munged", "/usr/sbin/slurmctld", "/usr/sbin/slurmd")
START_TIMEOUT_S = 90


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def skip_reason() -> str | None:
    missing = [d for d in (*DAEMONS, "sbatch", "srun") if shutil.which(d) is None]
    if missing:
        return f"SLURM is not installed ({', '.join(missing)}): apt-get install -y slurm-wlm munge"
    if os.geteuid() != 0:
        return "a private SLURM cluster needs root (slurmd starts jobs as their user)"
    return None


def _conf(tmp: Path) -> str:
    host = socket.gethostname().split(".")[0]
    return f"""\
ClusterName=dlbenchtest
SlurmctldHost={host}
SlurmctldPort={free_port()}
SlurmdPort={free_port()}
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket={tmp / "munge.sock"}
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
SchedulerType=sched/builtin
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
StateSaveLocation={tmp / "state"}
SlurmdSpoolDir={tmp / "spool"}
SlurmctldPidFile={tmp / "slurmctld.pid"}
SlurmdPidFile={tmp / "slurmd.pid"}
SlurmctldLogFile={tmp / "slurmctld.log"}
SlurmdLogFile={tmp / "slurmd.log"}
ReturnToService=2
MpiDefault=none
KillWait=10
NodeName={host} CPUs={os.cpu_count()} State=UNKNOWN
PartitionName=test Nodes=ALL Default=YES MaxTime=INFINITE State=UP
"""


@contextlib.contextmanager
def slurm_cluster(tmp: Path) -> Iterator[dict[str, str]]:
    """Start the cluster; yield the environment its clients need (SLURM_CONF); stop every daemon after."""
    if reason := skip_reason():
        pytest.skip(reason)
    for d in ("state", "spool"):
        (tmp / d).mkdir(parents=True)
    key = tmp / "munge.key"
    key.write_bytes(os.urandom(1024))
    key.chmod(0o400)
    conf = tmp / "slurm.conf"
    conf.write_text(_conf(tmp))
    env = {"SLURM_CONF": str(conf)}
    daemons: list[subprocess.Popen] = []
    try:
        daemons.append(_start(tmp, "munged", [
            "/usr/sbin/munged", "--foreground", "--force", f"--key-file={key}", f"--socket={tmp / 'munge.sock'}",
            f"--pid-file={tmp / 'munged.pid'}", f"--log-file={tmp / 'munged.log'}", f"--seed-file={tmp / 'munge.seed'}",
        ]))  # fmt: skip
        _wait(lambda: (tmp / "munge.sock").exists(), "munged", tmp)
        daemons.append(_start(tmp, "slurmctld", ["/usr/sbin/slurmctld", "-D", "-f", str(conf)]))
        daemons.append(_start(tmp, "slurmd", ["/usr/sbin/slurmd", "-D", "-f", str(conf)]))
        _wait(lambda: _node_state(env) == "idle", "the node", tmp)
        yield env
    finally:
        subprocess.run(["scancel", "--full", "--partition=test"], env=os.environ | env, capture_output=True)
        for p in reversed(daemons):
            p.terminate()
            try:
                p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait(timeout=10)


def _start(tmp: Path, name: str, cmd: list[str]) -> subprocess.Popen:
    log = (tmp / f"{name}.out").open("w")
    return subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)


def _node_state(env: dict[str, str]) -> str:
    res = subprocess.run(["sinfo", "-h", "-o", "%T"], env=os.environ | env, capture_output=True, text=True)
    return res.stdout.strip()


def _wait(ready, what: str, tmp: Path) -> None:
    deadline = time.monotonic() + START_TIMEOUT_S
    while not ready():
        if time.monotonic() > deadline:
            logs = "\n".join(f"{p.name}: {p.read_text()[-800:]}" for p in sorted(tmp.glob("*.log")))
            pytest.fail(f"{what} not ready after {START_TIMEOUT_S}s\n{logs}")
        time.sleep(0.5)
