"""Headless Chromium for tests that check what a browser really shows (.ci/run installs it)."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

import pytest

CHROMIUM = Path("/usr/bin/chromium")
needs_chromium = pytest.mark.skipif(
    not CHROMIUM.exists(), reason="needs /usr/bin/chromium (apt-get install -y chromium)"
)
FLAGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync", "--hide-scrollbars",
]  # fmt: skip


def chromium(tmp_path: Path, *args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    """One Chromium run with a fresh profile (no remembered state between calls)."""
    profile = tmp_path / f"profile-{time.monotonic_ns()}"
    return subprocess.run(
        [str(CHROMIUM), *FLAGS, f"--user-data-dir={profile}", *args],
        capture_output=True, text=True, timeout=timeout,
    )  # fmt: skip
