"""TF+XLA Transformer-base training in one process, alternating short windows (2 steps, as frameworks_gpu's 5 s
over 10 windows gives at fp32 on an H100) with long ones (10 steps, as the plain loop's command), three rounds:
whether the window's length alone moves the rate, with the process, compilation and clocks held the same.
Run as the plain loop is: /tmp/tfpy results/h200/commands_z31/window_length.py --device cuda --precision fp32
--mode train --xla --batch-tokens 40960 --min-len 64 --max-len 64 --warmup 10."""

import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "yardsticks"))
import bare_tf_common as common  # noqa: E402
import bare_tf_transformer  # noqa: E402

BLOCKS = [(2, 10), (10, 5)] * 3  # (steps a window, windows)


def alternating(step, a, prec):
    loss = None
    with prec.scope():
        for _ in range(a.warmup):
            _, loss = step()
        common.sync()
        for steps, windows in BLOCKS:
            rates = []
            for _ in range(windows):
                t0 = time.perf_counter()
                units = 0
                for _ in range(steps):
                    n, loss = step()
                    units += n
                common.sync()
                rates.append(units / (time.perf_counter() - t0))
            row = {"steps": steps, "windows": windows, "median": statistics.median(rates), "rates": rates}
            print("WINDOW " + json.dumps(row), flush=True)
    return rates, loss


common.measure = alternating
bare_tf_transformer.common.measure = alternating
sys.exit(bare_tf_transformer.main())
