"""The DALI data path on CPU: record formats, dataset checks, pipelines for all three formats, the
framework adapters, corrupt-image handling and `mode=data` through the real worker.

DALI runs CPU-only here (device_id=None). Each framework adapter runs in its own subprocess (as in
real use: one worker per job), never two frameworks in one process: triton (torch) segfaults when it
loads after TensorFlow, and MXNet's engine and OpenBLAS stay out of the pytest process. The
subprocesses start together at the beginning (fixture `adapters`), so their imports overlap.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import struct
import subprocess
import sys
from pathlib import Path

import pytest

from dlbench.config import JobConfig
from dlbench.data import formats
from dlbench.data.validate import check_dataset
from dlbench.errors import ConfigError

pytest.importorskip("nvidia.dali")

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "datasets" / "make_image_dataset.py"
CLASSES, PER_CLASS, CORRUPT = 3, 8, 2
N = CLASSES * PER_CLASS
SIZE = 32


def _make(out: Path, corrupt: int = 0, workers: int = 1) -> Path:
    module = sys.modules.get("make_image_dataset")
    if module is None:  # registered, so its process pool can pickle the image function by name
        spec = importlib.util.spec_from_file_location("make_image_dataset", SCRIPT)
        module = sys.modules["make_image_dataset"] = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    args = ["--out", str(out), "--classes", str(CLASSES), "--per-class", str(PER_CLASS), "--seed", "1"]
    module.main(
        [*args, "--min-size", "64", "--max-size", "128", "--corrupt", str(corrupt), "--workers", str(workers)]
    )
    return out


@pytest.fixture(scope="session")
def data(tmp_path_factory) -> Path:
    return _make(tmp_path_factory.mktemp("clean"))


@pytest.fixture(scope="session")
def corrupt(tmp_path_factory) -> Path:
    return _make(tmp_path_factory.mktemp("corrupt"), CORRUPT)


def job_for(path: Path, fmt: str | None, mode: str = "train", **data) -> JobConfig:
    job = JobConfig()
    job.mode = mode
    job.device = "cpu"
    job.dataset.name = "imagenet"
    job.dataset.path = str(path)
    job.dataset.format = fmt
    job.model.image_size = SIZE
    job.model.num_classes = 10
    job.schedule.batch_size = 4
    job.data.num_threads = 2
    for key, value in data.items():
        setattr(job.data, key, value)
    return job


# ---- subprocesses: one per framework, started together ---------------------------------------

TORCH = """
import json, sys, torch
from dlbench.backends.torch.bench import TorchBench
from dlbench.backends.torch.dali_source import DaliSource
from dlbench.backends.torch.precision import TorchPrecision
from dlbench.config import JobConfig, PrecisionConfig
from dlbench.core.precision import plan_precision
jobs = {k: JobConfig.from_dict(v) for k, v in json.loads(sys.argv[1]).items()}
out = {}
cpu = torch.device("cpu")
fp32 = TorchPrecision(plan_precision(PrecisionConfig(), "cpu"), cpu)
src = DaliSource(jobs["folder"], cpu, torch.contiguous_format, fp32)
batch = src.next()
x, y = batch.inputs[0], batch.targets[0]
out["contiguous"] = [list(x.shape), str(x.dtype), str(y.dtype), x.is_contiguous(), y.tolist(), batch.units]
src.close()
pure_bf16 = TorchPrecision(plan_precision(PrecisionConfig(name="bf16", cpu_dtype="bfloat16"), "cpu"), cpu)
src = DaliSource(jobs["recordio"], cpu, torch.channels_last, pure_bf16)
x = src.next().inputs[0]
out["channels_last"] = [list(x.shape), str(x.dtype), x.is_contiguous(memory_format=torch.channels_last)]
src.close()
bench = TorchBench(jobs["bench"])
bench.step()
out["bench"] = [bench.loss(), bench.run_facts()["data_skipped"]]
bench.close()
print("RESULT " + json.dumps(out))
"""

TF = """
import glob, json, sys
import tensorflow as tf
from dlbench.backends.tensorflow.dali_source import DaliSource
from dlbench.config import JobConfig
from dlbench.core.bench import ExplainedSource
from dlbench.data.validate import CorruptImageError
jobs = {k: JobConfig.from_dict(v) for k, v in json.loads(sys.argv[1]).items()}
out = {}
files = sorted(glob.glob(jobs["tfrecord"].dataset.path + "/train-*[0-9]"))
spec = {"image/encoded": tf.io.FixedLenFeature((), tf.string), "image/class/label": tf.io.FixedLenFeature([1], tf.int64)}
records = [tf.io.parse_single_example(r, spec) for r in tf.data.TFRecordDataset(files)]  # checks CRCs
out["tf_read"] = [len(records), sorted({int(r["image/class/label"][0]) for r in records})]
src = DaliSource(jobs["tfrecord"], "/CPU:0", "float32")
batch = src.next()
x, y = batch.inputs[0], batch.targets[0]
out["batch"] = [x.shape.as_list(), x.dtype.name, y.dtype.name, y.numpy().tolist(), x.device]
src.close()
src = ExplainedSource(DaliSource(jobs["corrupt"], "/CPU:0", "float32"))  # as the skeleton wraps it
try:
    src.next()
    out["corrupt"] = None
except CorruptImageError as exc:
    out["corrupt"] = str(exc)
src.close()
print("RESULT " + json.dumps(out))
"""

MXNET = """
import json, sys
from dlbench.backends.mxnet._compat import mx
from dlbench.backends.mxnet.dali_source import DaliSource
from dlbench.config import JobConfig
jobs = {k: JobConfig.from_dict(v) for k, v in json.loads(sys.argv[1]).items()}
out = {}
path = jobs["recordio"].dataset.path
rec = mx.recordio.MXIndexedRecordIO(path + "/train.idx", path + "/train.rec", "r")
headers = [mx.recordio.unpack(rec.read_idx(k))[0] for k in rec.keys]
out["mx_read"] = [len(headers), sorted({int(h.label) for h in headers})]
src = DaliSource(jobs["recordio"], mx.cpu(), "float32")
batch = src.next()
x, y = batch.inputs[0], batch.targets[0]
out["batch"] = [list(x.shape), x.dtype.__name__, y.dtype.__name__, y.asnumpy().tolist(), str(x.context)]
src.close()
src = DaliSource(jobs["skip"], mx.cpu(), "float32")
for _ in range(8):
    src.next()
out["skipped"] = src.skipped
src.close()
print("RESULT " + json.dumps(out))
"""


def _env() -> dict[str, str]:
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", PYTHONPATH=str(ROOT / "src"))
    env.pop("CUDA_VISIBLE_DEVICES", None)
    return env


@pytest.fixture(scope="session")
def adapters(data, corrupt, tmp_path_factory):
    """Start the torch, TF, MXNet and worker subprocesses at once; results by name when done."""
    bench = job_for(corrupt / "folder", "folder", skip_corrupt=True)
    bench.model.name, bench.model.depth = "resnet_cifar", 8
    bad = job_for(corrupt / "tfrecord", "tfrecord", "infer", shuffle=False)
    bad.schedule.batch_size = N + CORRUPT
    jobs = {
        "torch": {
            "folder": job_for(data / "folder", "folder"),
            "recordio": job_for(data / "recordio", "recordio"),
            "bench": bench,
        },
        "tf": {"tfrecord": job_for(data / "tfrecord", "tfrecord"), "corrupt": bad},
        "mxnet": {
            "recordio": job_for(data / "recordio", "recordio"),
            "skip": job_for(corrupt / "recordio", "recordio", skip_corrupt=True),
        },
    }
    scripts = {"torch": TORCH, "tf": TF, "mxnet": MXNET}
    procs = {}
    for name, script in scripts.items():
        arg = json.dumps({k: v.to_dict() for k, v in jobs[name].items()})
        procs[name] = subprocess.Popen(
            [sys.executable, "-c", script, arg],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=_env(),
        )
    worker = job_for(corrupt / "folder", "folder", skip_corrupt=True)
    worker.mode = "data"
    worker.framework.name = "torch"
    worker.schedule.warmup_steps, worker.schedule.steps_per_window, worker.schedule.windows = 1, 3, 2
    job_path = tmp_path_factory.mktemp("worker") / "job.json"
    job_path.write_text(json.dumps(worker.to_dict()))
    procs["worker"] = subprocess.Popen(
        [sys.executable, "-m", "dlbench.worker", "--job", str(job_path), "--events-fd", "1"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=_env(),
    )
    results = {}
    for name, proc in procs.items():
        stdout, stderr = proc.communicate(timeout=300)
        results[name] = (proc.returncode, stdout, stderr)
    return results


def _result(adapters, name: str) -> dict:
    code, stdout, stderr = adapters[name]
    lines = [line for line in stdout.splitlines() if line.startswith("RESULT ")]
    assert code == 0 and lines, f"{name} subprocess failed ({code}):\n{stderr[-3000:]}"
    return json.loads(lines[-1].removeprefix("RESULT "))


# ---- formats --------------------------------------------------------------------------------


def test_crc32c_and_example_round_trip():
    assert formats.crc32c(b"123456789") == 0xE3069283  # the standard CRC-32C check value
    example = {
        "image/encoded": b"\xff\xd8abc",
        "image/class/label": 7,
        "neg": -3,
        "f": [0.5, 2.0],
        "s": "JPEG",
    }
    decoded = formats.decode_example(formats.encode_example(example))
    assert decoded == {
        "image/encoded": [b"\xff\xd8abc"],
        "image/class/label": [7],
        "neg": [-3],
        "f": [0.5, 2.0],
        "s": [b"JPEG"],
    }


def test_recordio_escapes_the_magic_word(tmp_path):
    magic = struct.pack("<I", formats.RECORDIO_MAGIC)
    records = [b"abcd" + magic + b"xyz", magic + magic + b"12345", b"plain"]
    with formats.RecordIOWriter(tmp_path / "r.rec") as writer:
        offsets = [writer.write(r) for r in records]
    assert [d for _, d in formats.iter_recordio(tmp_path / "r.rec")] == records
    assert [o for o, _ in formats.iter_recordio(tmp_path / "r.rec")] == offsets


def test_image_checks_find_truncated_and_foreign_files(data, corrupt, tmp_path):
    good = sorted((data / "folder" / "c000").iterdir())[0]
    assert formats.image_file_problem(good, full=True) is None
    bad = sorted((corrupt / "folder" / "c000").glob("corrupt_*"))[0]
    assert "truncated JPEG" in formats.image_file_problem(bad)
    (tmp_path / "x.jpg").write_bytes(b"not an image at all, just text" * 4)
    assert "not an image" in formats.image_file_problem(tmp_path / "x.jpg")


def test_dataset_script_is_deterministic(data, tmp_path):
    again = _make(tmp_path / "again", workers=2)  # the process pool makes the same bytes
    for rel in ("folder/c001/c001_00003.jpg", "tfrecord/train-00001-of-00002", "recordio/train.rec"):
        assert (again / rel).read_bytes() == (data / rel).read_bytes(), rel


# ---- dataset checks (orchestrator side, no DALI) --------------------------------------------


def _config_error(job: JobConfig) -> str:
    with pytest.raises(ConfigError) as info:
        check_dataset(job)
    message = str(info.value)
    assert "\n" not in message
    return message


def test_check_dataset_facts_and_path_env(data, monkeypatch):
    facts = check_dataset(job_for(data / "folder", "folder"))
    assert facts["dataset.found_samples"] == N and facts["dataset.found_classes"] == CLASSES
    assert check_dataset(job_for(data / "tfrecord", "tfrecord"))["dataset.found_samples"] == N
    assert check_dataset(job_for(data / "recordio", None))["dataset.resolved_format"] == "recordio"
    job = job_for(data / "folder", None)
    job.dataset.path, job.dataset.path_env = None, "DLBENCH_TEST_DATA"
    assert "DLBENCH_TEST_DATA is not set" in _config_error(job)
    monkeypatch.setenv("DLBENCH_TEST_DATA", str(data / "folder"))
    assert check_dataset(job)["dataset.resolved_format"] == "folder"
    assert job.dataset.path == str(data / "folder")  # resolved for the worker and MLflow


def test_check_dataset_rejects_bad_layouts(data, tmp_path):
    assert "does not exist" in _config_error(job_for(tmp_path / "nope", "folder"))
    (tmp_path / "empty").mkdir()
    assert "is empty" in _config_error(job_for(tmp_path / "empty", "folder"))
    flat = tmp_path / "flat"
    flat.mkdir()
    for f in sorted((data / "folder" / "c000").iterdir())[:2]:
        shutil.copy(f, flat)
    assert "no class subfolders" in _config_error(job_for(flat, "folder"))
    assert "set dataset.format=tfrecord" in _config_error(job_for(data / "tfrecord", "folder"))
    assert "dataset.format=recordio but" in _config_error(job_for(data / "folder", "recordio"))
    noidx = shutil.copytree(data / "tfrecord", tmp_path / "tfr")
    for idx in noidx.glob("*.idx"):
        idx.unlink()
    assert "no DALI index" in _config_error(job_for(noidx, "tfrecord"))
    assert len(formats.write_indexes(noidx)) == 2  # the fix the message names
    assert check_dataset(job_for(noidx, "tfrecord"))["dataset.found_samples"] == N
    rec = shutil.copytree(data / "recordio", tmp_path / "rec")
    (rec / "train.idx").unlink()
    assert "has no index train.idx" in _config_error(job_for(rec, "recordio"))
    few = job_for(data / "folder", "folder")
    few.model.num_classes = 2
    assert "3 classes but model.num_classes=2" in _config_error(few)
    gpu = job_for(data / "folder", "folder", decode="gpu")
    assert "data.decode=gpu" in _config_error(gpu)
    synthetic = JobConfig(mode="data")
    assert "mode=data" in _config_error(synthetic)


def test_folder_splits_follow_the_mode(data, tmp_path):
    for split in ("train", "val"):
        shutil.copytree(data / "folder", tmp_path / "ds" / split)
    assert check_dataset(job_for(tmp_path / "ds", "folder", "train"))["dataset.split"] == "train"
    assert check_dataset(job_for(tmp_path / "ds", "folder", "infer"))["dataset.split"] == "val"


# ---- pipelines (DALI, CPU) ------------------------------------------------------------------


@pytest.mark.parametrize("fmt", ["folder", "tfrecord", "recordio"])
@pytest.mark.parametrize(
    ("mode", "layout", "dtype"), [("train", "NHWC", "float32"), ("infer", "NCHW", "float16")]
)
def test_pipeline_shapes_layouts_labels(data, fmt, mode, layout, dtype):
    from dlbench.data.pipelines import ImagePipeline

    job = job_for(data / fmt, fmt, mode, shuffle=False)
    job.schedule.batch_size = N  # one batch = the whole set, in reader order
    p = ImagePipeline(job, None, layout, dtype)
    try:
        x, y = (out.as_array() for out in p.pipe.run())
    finally:
        p.close()
    assert x.shape == ((N, SIZE, SIZE, 3) if layout == "NHWC" else (N, 3, SIZE, SIZE))
    assert str(x.dtype) == dtype and y.shape == (N,)
    assert sorted(y.tolist()) == sorted(list(range(CLASSES)) * PER_CLASS)  # 0-based in every format
    assert abs(float(x.astype("float32").mean())) < 2.5  # normalized, not raw 0..255 pixels


def test_num_samples_takes_a_spread_subset(data):
    from dlbench.data.pipelines import ImagePipeline

    for fmt in ("folder", "tfrecord", "recordio"):
        job = job_for(data / fmt, fmt, "infer", shuffle=False)
        job.dataset.num_samples = 6
        job.schedule.batch_size = 6
        p = ImagePipeline(job, None)
        try:
            labels = p.pipe.run()[1].as_array().tolist()
        finally:
            p.close()
        assert p.num_samples == 6 and sorted(set(labels)) == [0, 1, 2], fmt


@pytest.mark.parametrize("fmt", ["folder", "tfrecord", "recordio"])
def test_corrupt_image_fails_naming_it_or_is_skipped(corrupt, fmt):
    from dlbench.data.pipelines import ImagePipeline
    from dlbench.data.validate import CorruptImageError

    job = job_for(corrupt / fmt, fmt, "infer", shuffle=False)
    job.schedule.batch_size = N + CORRUPT
    p = ImagePipeline(job, None)
    try:
        with pytest.raises(Exception) as info:
            p.pipe.run()
        err = p.explain(info.value)
    finally:
        p.close()
    assert isinstance(err, CorruptImageError)
    where = {"folder": "corrupt_000.jpg", "tfrecord": "train-0000", "recordio": "train.rec record at byte"}[
        fmt
    ]
    assert where in str(err) and "data.skip_corrupt=true" in str(err) and "\n" not in str(err)

    job = job_for(corrupt / fmt, fmt, "train", skip_corrupt=True)
    p = ImagePipeline(job, None)
    try:
        for _ in range(2 * (N // job.batch_size)):  # two epochs
            p.pipe.run()
    finally:
        p.close()
    assert p.skipped == CORRUPT and p.num_samples == N


def test_undecodable_file_dali_does_not_name_is_found(data, tmp_path):
    from dlbench.data.pipelines import ImagePipeline

    root = shutil.copytree(data / "folder", tmp_path / "ds")
    (root / "c001" / "zz_text.jpg").write_bytes(b"this is not a JPEG file " * 8)
    job = job_for(root, "folder", "infer", shuffle=False)
    job.schedule.batch_size = N + 1
    p = ImagePipeline(job, None)
    try:
        with pytest.raises(Exception) as info:
            p.pipe.run()
        assert "zz_text.jpg: not an image" in str(p.explain(info.value))
    finally:
        p.close()


# ---- adapters and mode=data (subprocesses) --------------------------------------------------


def test_torch_adapter_and_bench(adapters):
    out = _result(adapters, "torch")
    shape, dtype, ydtype, contiguous, labels, units = out["contiguous"]
    assert shape == [4, 3, SIZE, SIZE] and dtype == "torch.float32" and ydtype == "torch.int64" and contiguous
    assert units == 4  # images in the batch, counted on the host
    assert all(0 <= v < CLASSES for v in labels)
    assert out["channels_last"] == [[4, 3, SIZE, SIZE], "torch.bfloat16", True]  # NHWC memory, NCHW view
    loss, skipped = out["bench"]
    assert loss > 0 and skipped == CORRUPT


def test_tensorflow_adapter(adapters):
    out = _result(adapters, "tf")
    assert out["tf_read"] == [N, [1, 2, 3]]  # tf.data reads our TFRecords (CRCs ok), 1-based labels
    shape, dtype, ydtype, labels, device = out["batch"]
    assert (
        shape == [4, SIZE, SIZE, 3] and (dtype, ydtype) == ("float32", "int32") and device.endswith("CPU:0")
    )
    assert all(0 <= v < CLASSES for v in labels)
    assert "corrupt image" in out["corrupt"] and "train-0000" in out["corrupt"]


def test_mxnet_adapter(adapters):
    out = _result(adapters, "mxnet")
    assert out["mx_read"] == [N, [0, 1, 2]]  # mxnet.recordio reads our .rec/.idx
    shape, dtype, ydtype, labels, ctx = out["batch"]
    assert shape == [4, 3, SIZE, SIZE] and (dtype, ydtype, ctx) == ("float32", "float32", "cpu(0)")
    assert all(0 <= v < CLASSES for v in labels)
    assert out["skipped"] == CORRUPT


def test_mode_data_through_the_worker(adapters):
    code, stdout, stderr = adapters["worker"]
    assert code == 0, stderr[-3000:]
    events = [json.loads(line) for line in stdout.splitlines() if line.startswith("{")]
    windows = [e for e in events if e["event"] == "window"]
    assert len(windows) == 2 and all(w["throughput"] > 0 for w in windows)
    done = next(e for e in events if e["event"] == "done")
    assert done["run"]["data_skipped"] == CORRUPT and done["run"]["layout"] == "NCHW"
    assert done["precision"]["compute_dtype"] == "float32"  # what the pipeline emits
    assert [w["samples"] for w in windows] == [3 * 4, 3 * 4]  # 3 steps x batch 4 images per window
