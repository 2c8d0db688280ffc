"""NeuMF's weights, named once for all three frameworks (numpy only, no framework import).

NeuMF (He et al. 2017, as NVIDIA DeepLearningExamples' PyTorch NCF builds it): a GMF branch
(user and item embeddings of `mf_dim`, multiplied element-wise) beside an MLP branch (user and item
embeddings of `mlp_layers[0] // 2` each, concatenated, then Dense+ReLU layers of the remaining
widths); the two branch outputs are concatenated and one dense unit gives the logit.

Each backend keeps its own parameter names and layouts (torch and Gluon store a dense weight as
(out, in), Keras as (in, out)). Exchanging weights through the framework-neutral names below, with
dense kernels as (in, out), lets a test load one set of numbers into all three networks and compare
outputs.
"""

from __future__ import annotations

from collections.abc import Sequence

MF_DIM = 64
MLP_LAYERS = (256, 256, 128, 64)
EMBEDDINGS = ("mf_user", "mf_item", "mlp_user", "mlp_item")


def mlp_dense(mlp_layers: Sequence[int]) -> list[tuple[str, int, int]]:
    """The MLP's dense layers, input side first: (name, fan_in, fan_out) with names mlp0, mlp1, ..."""
    return [(f"mlp{i}", mlp_layers[i], mlp_layers[i + 1]) for i in range(len(mlp_layers) - 1)]


def weight_shapes(
    num_users: int, num_items: int, mf_dim: int = MF_DIM, mlp_layers: Sequence[int] = MLP_LAYERS
) -> dict[str, tuple[int, ...]]:
    """Neutral name -> shape, in build order: `<emb>.embedding` (rows, dim), `<dense>.kernel`
    (in, out) and `<dense>.bias` (out,)."""
    if len(mlp_layers) < 2 or mlp_layers[0] % 2:
        raise ValueError(
            f"model.mlp_layers={list(mlp_layers)}: need at least two widths and an even first width "
            "(it is split between the user and the item embedding)"
        )
    half = mlp_layers[0] // 2
    rows = {"user": num_users, "item": num_items}
    shapes: dict[str, tuple[int, ...]] = {}
    for emb in EMBEDDINGS:
        branch, side = emb.split("_")
        shapes[f"{emb}.embedding"] = (rows[side], mf_dim if branch == "mf" else half)
    for name, fan_in, fan_out in mlp_dense(mlp_layers):
        shapes[f"{name}.kernel"] = (fan_in, fan_out)
        shapes[f"{name}.bias"] = (fan_out,)
    shapes["final.kernel"] = (mlp_layers[-1] + mf_dim, 1)
    shapes["final.bias"] = (1,)
    return shapes


def check_weights(weights: dict, shapes: dict[str, tuple[int, ...]]) -> None:
    """Raise one ValueError naming every missing, unexpected or misshapen weight."""
    problems = [f"missing {k}" for k in shapes if k not in weights]
    problems += [f"unexpected {k}" for k in weights if k not in shapes]
    problems += [
        f"{k} has shape {tuple(weights[k].shape)}, expected {shape}"
        for k, shape in shapes.items()
        if k in weights and tuple(weights[k].shape) != shape
    ]
    if problems:
        raise ValueError("NeuMF weights do not fit the network: " + "; ".join(problems))
