"""The orchestrator and the worker start without the optional accuracy dependencies.

pycocotools (SSD300 mAP) and sacrebleu (Transformer BLEU) are needed only by mode=converge runs of those
models; a machine without them (the H200 image of issue #17) must still run every throughput job. An
eager import once stopped every job there with ModuleNotFoundError.
"""

import subprocess
import sys

CODE = """
import sys
for name in ("pycocotools", "sacrebleu"):
    sys.modules[name] = None  # any import of them now raises ImportError
import dlbench.converge, dlbench.orchestrator, dlbench.recording, dlbench.worker
print("ok")
"""


def test_orchestrator_and_worker_import_without_accuracy_deps() -> None:
    out = subprocess.run([sys.executable, "-c", CODE], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip() == "ok"
