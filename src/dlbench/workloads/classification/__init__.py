"""The classification workload: its spec (spec.py), framework-free pieces, data, evaluation, and one family per
framework (torch.py, tensorflow.py, mxnet.py)."""

from dlbench.workloads.classification.spec import ClassificationConfig, spec
from dlbench.workloads.registry import Workload, register

register(Workload("classification", ClassificationConfig, spec, __name__))
