"""The bench input source for a small real dataset held in memory (Fashion-MNIST, digits): the training
split in the seeded order of `data.epochs`, epoch after epoch, and the held-out split for evaluation.

Framework-free: batches are made with numpy on the host (NCHW images, int64 labels, the task spec's
names) and handed to the bench's own `to_device`, exactly as synthetic batches are, so every framework
trains on the same numbers in the same order for the same seed.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from dlbench.config import JobConfig
from dlbench.core.bench import Batch
from dlbench.core.spec import TaskSpec
from dlbench.data.epochs import EpochPlan, EpochSource, Normalizer, eval_batches
from dlbench.data.synthetic import HostBatch
from dlbench.workloads.classification.small_images import load_image_set


class MemorySource(EpochSource):
    def __init__(self, job: JobConfig, spec: TaskSpec, to_device: Callable[[HostBatch], Batch]) -> None:
        ds = job.dataset
        self.data = load_image_set(ds.name, ds.path).limit(ds.num_samples, ds.eval_samples)
        self.normalize = Normalizer.from_train(self.data.train_images, self.data.info.pixel_max)
        self.plan = EpochPlan(job.schedule.seed, job.batch_size, hflip=job.data.hflip)
        self.steps_per_epoch = self.plan.steps(len(self.data.train_labels))
        self.to_device = to_device
        self.input_name, self.target_name = next(iter(spec.inputs)), next(iter(spec.targets))
        self.start()

    def epoch_batches(self, epoch: int) -> Iterator[HostBatch]:
        d = self.data
        for x, y in self.plan.train_batches(d.train_images, d.train_labels, epoch, self.normalize):
            yield self._host(x, y)

    def _host(self, x: Any, y: Any) -> HostBatch:
        return HostBatch({self.input_name: x}, {self.target_name: y}, len(y))

    def eval_batches(self, batch_size: int) -> Iterator[HostBatch]:
        """The held-out split, every sample once, in file order (host batches: the bench predicts)."""
        for x, y in eval_batches(self.data.test_images, self.data.test_labels, batch_size, self.normalize):
            yield self._host(x, y)

    @property
    def eval_labels(self) -> Any:
        return self.data.test_labels

    def facts(self) -> dict[str, Any]:
        """What decided the data this run saw (MLflow tags run.*)."""
        p = self.plan
        return {
            "seed": p.seed,
            "data_order": f"numpy permutation per epoch from seed {p.seed} (data/seeds.py stream 'order')",
            "augmentation": f"hflip p=0.5, seed {p.seed} stream 'augment'" if p.hflip else "none",
            "train_samples": len(self.data.train_labels),
            "eval_samples": len(self.data.test_labels),
            "normalize": f"(x/{self.normalize.pixel_max:g} - {self.normalize.mean:.4f}) / {self.normalize.std:.4f}",
        }
