"""Framework-free building blocks shared by the orchestrator, the worker and every backend.

Nothing here imports a framework, Hydra or MLflow, so any layer may import from it without running
upward (docs/architecture.md, "Layout")."""
