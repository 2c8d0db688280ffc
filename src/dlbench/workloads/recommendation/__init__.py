"""The recommendation workload: its spec (spec.py), framework-free pieces, data, evaluation, and one family per
framework (torch.py, tensorflow.py, mxnet.py). It registers the workload, its data formats (formats.py) and
its quality metric."""

from dlbench.data.registry import register_format
from dlbench.workloads.recommendation.eval import hit_rate_at_10
from dlbench.workloads.recommendation.formats import FORMATS
from dlbench.workloads.recommendation.spec import RecommendationConfig, spec
from dlbench.workloads.registry import Metric, Workload, register

register(
    Workload(
        "recommendation",
        RecommendationConfig,
        spec,
        __name__,
        metrics={"hr@10": Metric("hr10", hit_rate_at_10, fraction=True)},
        smallest={"num_users": 16, "num_items": 24, "factors": 8, "mlp_layers": [16, 8], "batch_size": 10},
    )
)
for fmt in FORMATS:
    register_format(fmt)
