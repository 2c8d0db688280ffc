"""The translation workload: its spec (spec.py), framework-free pieces, data, evaluation, and one family per
framework (torch.py, tensorflow.py, mxnet.py). It registers the workload, its data formats (formats.py) and
its quality metric."""

from dlbench.data.registry import register_format
from dlbench.workloads.registry import Metric, Workload, register
from dlbench.workloads.translation.eval import corpus_bleu
from dlbench.workloads.translation.formats import FORMATS
from dlbench.workloads.translation.spec import TranslationConfig, spec, unsupported

register(
    Workload(
        "translation",
        TranslationConfig,
        spec,
        __name__,
        metrics={"bleu": Metric("bleu", corpus_bleu)},
        smallest={
            "size": "tiny",
            "vocab": 64,
            "batch_tokens": 0,
            "batch_size": 2,
            "lengths": "fixed",
            "max_len": 8,
            "dropout": 0.1,
        },  # fmt: skip
        unsupported=unsupported,
    )
)
for fmt in FORMATS:
    register_format(fmt)
