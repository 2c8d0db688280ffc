"""The classification workload: its spec (spec.py), framework-free pieces, data, evaluation, and one family per
framework (torch.py, tensorflow.py, mxnet.py). It registers the workload, its data formats (formats.py) and
its quality metric."""

from dlbench.data.registry import register_format
from dlbench.workloads.classification.eval import top1_accuracy
from dlbench.workloads.classification.formats import FORMATS
from dlbench.workloads.classification.spec import ClassificationConfig, spec
from dlbench.workloads.registry import Metric, Workload, register

register(
    Workload(
        "classification",
        ClassificationConfig,
        spec,
        __name__,
        metrics={"top1": Metric("accuracy", top1_accuracy, fraction=True)},
        smallest={"name": "resnet_cifar", "depth": 8, "image_size": 32, "num_classes": 10, "batch_size": 2},
    )
)
for fmt in FORMATS:
    register_format(fmt)
