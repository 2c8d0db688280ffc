"""The translation workload: its spec (spec.py), framework-free pieces, data, evaluation, and one family per
framework (torch.py, tensorflow.py, mxnet.py)."""

from dlbench.workloads.registry import Workload, register
from dlbench.workloads.translation.spec import TranslationConfig, spec

register(Workload("translation", TranslationConfig, spec, __name__))
