"""The detection workload: its spec (spec.py), framework-free pieces, data, evaluation, and one family per
framework (torch.py, tensorflow.py, mxnet.py)."""

from dlbench.workloads.detection.spec import DetectionConfig, spec
from dlbench.workloads.registry import Workload, register

register(Workload("detection", DetectionConfig, spec, __name__))
