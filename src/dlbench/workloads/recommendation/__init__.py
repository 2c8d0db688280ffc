"""The recommendation workload: its spec (spec.py), framework-free pieces, data, evaluation, and one family per
framework (torch.py, tensorflow.py, mxnet.py)."""

from dlbench.workloads.recommendation.spec import RecommendationConfig, spec
from dlbench.workloads.registry import Workload, register

register(Workload("recommendation", RecommendationConfig, spec, __name__))
