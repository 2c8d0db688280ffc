"""What the user sees while a job runs: a live bar on a terminal, a log line per window otherwise."""

from __future__ import annotations

import logging
import sys

log = logging.getLogger("dlbench")
# a worker silent this long gets a line (then one more each time as long again): a first step that compiles
# or autotunes for minutes (cuDNN's benchmark of fp32 convolutions) otherwise looks like a hang
QUIET_S = 60.0


class Progress:
    def __init__(self, label: str, warmup_steps: int, windows: int, steps_per_window: int) -> None:
        self.label = label
        self.unit = "samples"  # the task's throughput unit, once the worker has said it (built event)
        self.windows = windows
        self.k = steps_per_window
        self.warmup = warmup_steps
        self.total = warmup_steps + windows * steps_per_window
        self._built = False
        self._warm_done = 0
        self._quiet_told = 0
        self._bar = None
        if sys.stderr.isatty():
            from tqdm import tqdm

            self._bar = tqdm(total=self.total, desc=label, unit="step", dynamic_ncols=True, leave=True)

    def message(self, text: str) -> None:
        if self._bar is not None:
            self._bar.set_postfix_str(text)
        else:
            log.info("%s: %s", self.label, text)

    def built(self, text: str) -> None:
        self._built, self._quiet_told = True, 0
        self.message(text)

    def quiet(self, silent_s: float) -> None:
        """The worker has said nothing for `silent_s` seconds: a line at each multiple of QUIET_S naming
        the step it is in."""
        if silent_s < QUIET_S:
            self._quiet_told = 0
            return
        if silent_s < QUIET_S * (self._quiet_told + 1):
            return
        self._quiet_told = int(silent_s // QUIET_S)
        if not self._built:
            where = "starting (imports, building the model)"
        elif self._warm_done < self.warmup:
            where = f"warm-up step {self._warm_done + 1}/{self.warmup} (the first steps compile and autotune)"
        else:
            where = "running"
        self.message(f"{where}: nothing new from the worker for {int(silent_s)} s")

    def warmup_step(self, step: int, of: int) -> None:
        self._warm_done, self._quiet_told = step, 0
        if of != self.warmup:  # the bench warms up longer (one step per batch shape): the bar grows
            self.total += of - self.warmup
            self.warmup = of
            if self._bar is not None:
                self._bar.total = self.total
        if self._bar is not None:
            self._bar.update(1)
            self._bar.set_postfix_str(f"warm-up {step}/{of}")
        elif step == 1 or step == of:
            log.info("%s: warm-up step %d/%d", self.label, step, of)

    def timed_steps(self, steps_per_window: int) -> None:
        """The steps each window really runs (schedule.min_timed_s fits them to the measured step)."""
        if steps_per_window == self.k:
            return
        self.total += self.windows * (steps_per_window - self.k)
        self.k = steps_per_window
        if self._bar is not None:
            self._bar.total = self.total
        else:
            log.info("%s: %d steps per window (schedule.min_timed_s)", self.label, steps_per_window)

    def window(self, index: int, throughput: float) -> None:
        self._quiet_told = 0
        if self._bar is not None:
            self._bar.update(self.k)
            self._bar.set_postfix_str(f"{throughput:,.1f} {self.unit}/s")
        else:
            log.info(
                "%s: window %d/%d: %.2f %s/s", self.label, index + 1, self.windows, throughput, self.unit
            )

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()
            self._bar = None
