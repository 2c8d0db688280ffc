"""The errors every layer raises and the orchestrator classifies, in a leaf module that imports nothing of
dlbench, so that any module (data readers, backends, tracking) can raise them without importing the
config schema or the bench protocol."""

from __future__ import annotations


class ConfigError(ValueError):
    """A configuration a job cannot run with; its message is one line naming the key and the fix."""


class BackendUnavailable(RuntimeError):
    """The framework cannot run here (not installed, or no code for this GPU); one-line message."""
