"""TEST ONLY: a 2-layer MLP workload, living under tests/ to prove that a workload is one folder: the tests
name this package in $DLBENCH_WORKLOADS (tests/conftest.py) and the registry, the contract test and the
worker find it in every framework with no edit of src/. It also brings a data format of its own
(formats.py), registered the way a workload package under src/ registers its formats."""

from dlbench.data.registry import register_format
from dlbench.workloads.registry import Workload, register
from tests.workloads.mlp.formats import FORMATS
from tests.workloads.mlp.spec import MLPConfig, spec

register(
    Workload(
        "test_mlp",
        MLPConfig,
        spec,
        __name__,
        test_only=True,
        smallest={"features": 16, "hidden": 32, "batch_size": 8},
    )
)
for fmt in FORMATS:
    register_format(fmt)
