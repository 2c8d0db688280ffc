"""TensorFlow backend (Keras 3, NHWC): the task spec's networks (workloads/<task>/tensorflow.py), each defined to
be the same network as the torch backend's (equal parameter counts, equal conv + dense FLOPs).

TensorFlow is imported inside the functions, so importing this package stays cheap; the worker
imports tensorflow itself first (dlbench.backends.base.load_backend) to time the import.
"""

from __future__ import annotations

from typing import Any

from dlbench.config import JobConfig, ModelConfig
from dlbench.core.bench import Bench


def build(job: JobConfig) -> Bench:
    """Set up devices and precision, then build model, optimizer and synthetic batch."""
    from dlbench.backends.tensorflow.bench import TFBench

    return TFBench(job)


def versions() -> dict[str, str]:
    """Framework and (on GPU) CUDA/cuDNN versions TF was built with, plus the GPU's name."""
    import keras
    import tensorflow as tf

    out = {"tensorflow": tf.__version__, "keras": keras.__version__}
    gpus = tf.config.list_physical_devices("GPU")
    if gpus:
        info = tf.sysconfig.get_build_info()
        out["cuda"] = str(info.get("cuda_version", "unknown"))
        out["cudnn"] = str(info.get("cudnn_version", "unknown"))
        out["gpu"] = str(tf.config.experimental.get_device_details(gpus[0]).get("device_name", "unknown"))
    return out


def model_stats(model_cfg: ModelConfig) -> dict[str, Any]:
    """{"params", "gflops" (conv + dense, per sample), ...} from TF's profiler, for the parity check."""
    from dlbench.backends.tensorflow.stats import model_stats as _model_stats

    return _model_stats(model_cfg)
