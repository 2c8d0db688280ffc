"""NCF's HR@10 in mode=converge through the real CLI: NeuMF trained on ratings with a taste structure it can
learn ranks each user's held-out item far above the random baseline (10/101), the per-epoch eval/hr10
series and the summary reach MLflow, and the report's Accuracy section shows HR@10 in points."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from tests.conftest import Cli

pytestmark = pytest.mark.slow

RANDOM = 10 / 101  # HR@10 of a random ranking of 101 candidates
USERS, GROUPS, GROUP_ITEMS, RATED = 200, 10, 30, 20


def tastes(folder: Path) -> Path:
    """A u.data where each user rated 20 of the 30 items of its own group (10 groups): a model that learns
    the groups ranks the held-out item above nearly all 100 sampled negatives; popularity alone cannot
    (every item is about as popular)."""
    rng = np.random.default_rng(5)
    lines = []
    for user in range(USERS):
        group = user % GROUPS
        for k, item in enumerate(rng.choice(GROUP_ITEMS, size=RATED, replace=False)):
            lines.append(f"{user + 1}\t{group * GROUP_ITEMS + item + 1}\t5\t{1000 + k}")
    folder.mkdir(parents=True)
    (folder / "u.data").write_text("\n".join(lines) + "\n")
    return folder


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> dict:
    cli = Cli(tmp_path_factory.mktemp("ncf_converge"))
    data = tastes(cli.tmp / "tastes")
    res = cli.run(
        [
            "framework=torch",
            "model=ncf",
            "dataset=movielens",
            f"dataset.path={data}",
            "mode=converge",
            "precision=fp32",
            "schedule.batch_size=1024",
            "schedule.epochs=4",
            "schedule.target=0.5",
            "threads=1",
            "telemetry.interval_s=0.5",
        ],
        timeout=600,
        OMP_NUM_THREADS="1",
    )
    jobs = [r for r in cli.runs() if r.data.tags.get("dlbench.kind") == "job"]
    return {"cli": cli, "res": res, "jobs": jobs}


def test_hr10_is_recorded_per_epoch_and_far_above_random(store: dict) -> None:
    assert store["res"].returncode == 0, store["res"].stderr[-3000:]
    (run,) = store["jobs"]
    m, t = run.data.metrics, run.data.tags
    assert run.info.status == "FINISHED" and t["dlbench.eval_metric"] == "hr10"
    assert m["eval_final"] > 4 * RANDOM and m["eval_best"] >= m["eval_final"] and m["epochs_done"] == 4
    assert 1 <= m["epochs_to_target"] <= 4 and m["throughput"] > 0
    history = store["cli"].client().get_metric_history(run.info.run_id, "eval/hr10")
    assert sorted(p.step for p in history) == [1, 2, 3, 4]
    assert all(0.0 <= p.value <= 1.0 for p in history)
    # the run says how its data was drawn: seeded host negatives, the evaluation protocol
    assert t["run.negatives"].startswith("4 per positive, on the host") and t["run.eval_users"] == str(USERS)
    assert run.data.params["model.num_users"] == str(USERS)


def test_the_report_shows_hr10_in_its_accuracy_section(store: dict) -> None:
    md = (store["cli"].tmp / "sweep" / "report" / "report.md").read_text()
    accuracy = md[md.index("## Accuracy") : md.index("## Failed runs")]
    table = accuracy[accuracy.index("### ncf on movielens: hr10") :]
    (row,) = [line for line in table.splitlines() if line.startswith("| torch | fp32 (float32) |")]
    final = float(row.split("|")[4].split("±")[0])  # the final hr10 column (mean over seeds)
    assert final == pytest.approx(store["jobs"][0].data.metrics["eval_final"], abs=1e-4)
