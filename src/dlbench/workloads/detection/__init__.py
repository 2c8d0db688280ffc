"""The detection workload: its spec (spec.py), framework-free pieces, data, evaluation, and one family per
framework (torch.py, tensorflow.py, mxnet.py). It registers the workload, its data formats (formats.py) and
its quality metric."""

from dlbench.data.registry import register_format
from dlbench.workloads.detection.eval import coco_map50
from dlbench.workloads.detection.formats import FORMATS
from dlbench.workloads.detection.spec import DetectionConfig, spec
from dlbench.workloads.registry import Metric, Workload, register

register(
    Workload(
        "detection",
        DetectionConfig,
        spec,
        __name__,
        metrics={"coco_map": Metric("map50", coco_map50, fraction=True)},
        smallest={"image_size": 32, "batch_size": 2},  # SSD300's layers, 108 default boxes
    )
)
for fmt in FORMATS:
    register_format(fmt)
