"""The 2019 article's claims re-tested by the report (dlbench.report.claims), on a real sqlite store filled the
way jobs fill it: each verdict follows the measured intervals, names where the cells ran, and a claim the runs
cannot test says why."""

from __future__ import annotations

import functools

from dlbench.report import build_report
from dlbench.report.accuracy import AccuracyAnalysis, Verdict
from dlbench.report.analysis import analyze
from dlbench.report.claims import FAILS, HOLDS, UNTESTED, mixed_precision, retest
from dlbench.report.load import select
from dlbench.tracking.store import open_store
from tests.unit.test_report import GPU, log_job, make_sweep

H200 = {"gpu.gpu0_name": "NVIDIA H200"}


def _store(tmp_path, jobs: list[tuple[str, tuple[float, float, float], bool]]):
    """One sweep of `jobs` ("framework model precision mode", (p05, median, p95), on the GPU?)."""
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    client, eid = open_store(uri, "dlbench")
    sweep = make_sweep(client, eid, "claims")
    job = functools.partial(log_job, client, eid, sweep.run_id)
    for what, tput, gpu in jobs:
        params = {"throughput_unit": "images"} | (
            {"model.image_size": "32"} if "resnet_cifar" in what else {}
        )
        job(what, tput, metrics=GPU if gpu else None, tags=H200 if gpu else None, params=params)
    sweep.finish("FINISHED")
    return client, uri, sweep.run_id


def _retest(tmp_path, jobs):
    client, uri, run_id = _store(tmp_path, jobs)
    analysis = analyze(select(client, uri, run_id=run_id).jobs)
    return retest(analysis, AccuracyAnalysis([], []))


def test_each_claim_is_judged_cell_by_cell_on_a_cpu(tmp_path):
    """On a CPU: TF ahead of MXNet on ResNet-50 (224 px) beyond both spreads; MXNet fastest on the CIFAR
    ResNet (32 px) in training but slower in inference; amp faster than fp32 for PyTorch. Each verdict says
    the cells ran on a CPU while the article measured a GPU."""
    large, small, mixed = _retest(
        tmp_path,
        [
            ("tf resnet50 fp32 train", (200, 210, 220), False),
            ("torch resnet50 fp32 train", (190, 200, 215), False),
            ("mxnet resnet50 fp32 train", (150, 160, 170), False),
            ("torch resnet50 amp train", (380, 400, 420), False),
            ("mxnet resnet_cifar fp32 train", (500, 520, 540), False),
            ("torch resnet_cifar fp32 train", (400, 410, 420), False),
            ("mxnet resnet_cifar fp32 infer", (100, 105, 110), False),
            ("tf resnet_cifar fp32 infer", (190, 200, 210), False),
        ],
    )
    assert (
        large.verdict == HOLDS and "on a CPU" in large.where and "the article measured a GPU" in large.where
    )
    assert large.evidence == [
        "resnet50 train fp32: TensorFlow 210.0 images/s against MXNet 160.0 images/s (1.31×): holds."
    ]
    assert small.verdict == "holds in 1, does not hold in 1 (of 2 cells)"
    assert small.evidence == [
        "resnet_cifar infer fp32: MXNet 105.0 images/s against the fastest other, TensorFlow 200.0 images/s "
        "(0.53×): does not hold.",
        "resnet_cifar train fp32: MXNet 520.0 images/s against the fastest other, PyTorch 410.0 images/s "
        "(1.27×): holds.",
    ]
    assert (
        mixed.verdict
        == f"speed: {HOLDS}; accuracy: not tested in these runs (mode=converge gives its verdicts)"
    )
    assert len(mixed.evidence) == 1 and "PyTorch (eager): amp" in mixed.evidence[0]


def test_overlapping_intervals_are_no_measurable_difference(tmp_path):
    large, *_ = _retest(
        tmp_path,
        [("torch vgg16 fp32 train", (90, 100, 110), False), ("mxnet vgg16 fp32 train", (95, 98, 112), False)],
    )
    assert large.verdict == "no measurable difference"
    assert large.evidence[0].endswith("(1.02×): no measurable difference.")


def test_on_a_hopper_gpu_without_mxnet_the_mxnet_claims_are_not_testable_and_say_why(tmp_path):
    large, small, mixed = _retest(
        tmp_path,
        [
            ("tf resnet50 fp32 train", (700, 710, 720), True),
            ("tf resnet50 amp train", (2000, 2100, 2200), True),
            ("torch resnet50 amp train", (2000, 2050, 2100), True),
        ],
    )
    for claim in (large, small):
        assert claim.verdict == UNTESTED and not claim.evidence
        assert (
            "MXNet ran in none of these runs" in claim.where and "re-test the claim on a CPU" in claim.where
        )
    assert mixed.where == "on NVIDIA H200"  # a GPU, as the article: no caveat
    assert mixed.verdict.startswith(f"speed: {HOLDS}")  # tf: 2,100 vs 710; torch has no fp32 run to compare


def test_mixed_precision_takes_the_accuracy_verdicts_too(tmp_path):
    client, uri, run_id = _store(
        tmp_path,
        [
            ("torch resnet50 fp32 train", (95, 100, 105), True),
            ("torch resnet50 amp train", (190, 200, 210), True),
        ],
    )
    analysis = analyze(select(client, uri, run_id=run_id).jobs)
    text = "torch, small_cnn on fashion_mnist: amp matches fp32 within δ"
    matches = AccuracyAnalysis([], [Verdict("small_cnn", "torch", "amp", "matches", text)])
    assert mixed_precision(analysis, matches).verdict == HOLDS
    worse = AccuracyAnalysis([], [Verdict("small_cnn", "torch", "amp", "worse", "amp is worse than fp32")])
    result = mixed_precision(analysis, worse)
    assert result.verdict == f"speed: {HOLDS}; accuracy: {FAILS}"
    assert result.evidence[-1] == "accuracy, amp is worse than fp32"
    unsettled = [
        Verdict("small_cnn", fw, "amp", kind, "...")
        for fw, kind in (("tf", "inconclusive"), ("torch", "matches"))
    ]
    assert mixed_precision(analysis, AccuracyAnalysis([], unsettled)).verdict == (
        f"speed: {HOLDS}; accuracy: {HOLDS} in 1, inconclusive in 1 (of 2 cells)"
    )


def test_the_report_has_the_claims_section(tmp_path):
    client, uri, run_id = _store(
        tmp_path,
        [
            ("mxnet resnet_cifar fp32 train", (500, 520, 540), False),
            ("torch resnet_cifar fp32 train", (400, 410, 420), False),
        ],
    )
    report = build_report(client, uri, tmp_path / "report", run_id=run_id)
    md = report.markdown.read_text()
    section = md.split("## The 2019 article's claims, re-tested", 1)[1].split("\n## ", 1)[
        0
    ]  # to the next section
    assert "| On small images (CIFAR-size) MXNet is the fastest framework. | holds | on a CPU" in section
    assert (
        "| On large inputs (ImageNet-size images) TensorFlow and PyTorch are faster than MXNet. | not testable here |"
        in section
    )
    assert "- Small images: resnet_cifar train fp32: MXNet 520.0 images/s" in section
    assert section.index("| claim | verdict here | tested |") < section.index(
        "### The cells behind each verdict"
    )
    assert 'id="claims"' in report.html.read_text()
