"""PyTorch networks, one module per task (classification.py, ...), found by the bench as
`models.<model.task>` (dlbench.backends.skeleton.load_family). A module provides
`build_model(cfg) -> nn.Module` and may provide `infer(model, inputs) -> outputs`."""
