"""One run seed, split into independent random streams for everything a training run draws.

`schedule.seeds` gives each run one integer. From it, numpy derives a separate stream per purpose
(data order, augmentation, weight initialisation, sampled negatives, evaluation candidates) and per epoch, so changing the number of epochs or
turning augmentation on never changes the data order, and the three frameworks, fed by the same numpy
code, see the same batches in the same order and start from the same weights for the same seed.
"""

from __future__ import annotations

import numpy as np

STREAMS = {"order": 0, "augment": 1, "init": 2, "negatives": 3, "eval": 4}


def stream(seed: int, purpose: str, *keys: int) -> np.random.Generator:
    """The generator for `purpose` (a key of STREAMS) of run `seed`, further keyed by e.g.
    the epoch; the same arguments always give the same numbers, on any machine."""
    if seed < 0 or any(k < 0 for k in keys):
        raise ValueError(f"seeds and keys must be non-negative integers (got seed={seed}, keys={keys})")
    return np.random.default_rng([seed, STREAMS[purpose], *keys])
