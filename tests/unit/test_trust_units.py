"""Issue #10's pure functions: masking secrets, refusing unknown keys, threads."""

from __future__ import annotations

import os

import pytest

from dlbench.backends.threads import available_cpus, resolve, thread_env, worker_env
from dlbench.config import register_configs
from dlbench.core.secrets import HIDDEN_ENV, hide_in_overrides, is_secret_name, mask
from dlbench.overrides import check_overrides


@pytest.mark.parametrize(
    ("text", "masked"),
    [
        ("tracking.uri=http://u:PW@host:5000", "tracking.uri=http://u:***@host:5000"),
        ("postgresql://bob:s3cr%40t@db/mlflow", "postgresql://bob:***@db/mlflow"),
        (r"tracking.uri=http\://u\:PW@h\:5000", r"tracking.uri=http\://u:***@h\:5000"),  # as Hydra logs it
        ("https://h/x?password=PW&keep=1", "https://h/x?password=***&keep=1"),
        ("https://h/x?X-Amz-Signature=S&access_token=T", "https://h/x?X-Amz-Signature=***&access_token=***"),
        ("sqlite:////tmp/a/mlflow.db", "sqlite:////tmp/a/mlflow.db"),
        ("user@example.com wrote http://host/path", "user@example.com wrote http://host/path"),
    ],
)
def test_mask_hides_uri_credentials_and_keeps_the_rest(text, masked):
    assert mask(text) == masked


def test_secret_looking_environment_names():
    secret = [
        "GITHUB_TOKEN",
        "AWS_SECRET_ACCESS_KEY",
        "DB_PASSWORD",
        "OPENAI_API_KEY",
        "MLFLOW_TRACKING_PASSWORD",
    ]
    plain = ["PATH", "OMP_NUM_THREADS", "CUDA_VISIBLE_DEVICES", "KEYBOARD_LAYOUT"]
    assert all(is_secret_name(n) for n in secret) and not any(is_secret_name(n) for n in plain)


@pytest.mark.parametrize(
    ("argv", "hint"),
    [
        (["precison=amp"], "did you mean precision"),
        (["+precison=amp"], "did you mean precision"),
        (["-m", "model.batchsize=3"], "did you mean model.batch_size"),
        (["++schedule.window=3"], "did you mean schedule.windows"),
    ],
)
def test_an_unknown_key_is_named_with_the_closest_ones(argv, hint):
    register_configs()
    assert hint in check_overrides(argv)


@pytest.mark.parametrize(
    ("argv", "hint"),
    [
        (
            ["framework=pytorch"],
            "framework=pytorch is not an option in `framework=pytorch`: did you mean torch?",
        ),
        (["framework=torch_schema"], "framework=torch_schema is not an option"),  # a schema, not an option
        (["-m", "framework=tf,pytorch"], "framework=pytorch is not an option"),
        (["model=resnet"], "did you mean resnet50 or resnet_cifar?"),
        (["+experiment=smok"], "did you mean smoke?"),
    ],
)
def test_an_unknown_group_option_is_one_line_with_the_closest_options(argv, hint):
    register_configs()
    refused = check_overrides(argv)
    assert hint in refused and "(options: " in refused and "\n" not in refused
    assert "torch_schema" not in refused.split("(options: ")[1]  # internal schema names are never offered


@pytest.mark.parametrize(
    ("argv", "owners", "composed"),
    [
        (["framework=torch", "framework.prng=rbg"], "framework=jax only", "framework=torch"),
        (["framework.prng=rbg"], "framework=jax only", "framework=torch"),  # conf/config.yaml's default
        (["-m", "framework=jax,tf", "framework.prng=rbg"], "framework=jax only", "framework=tf"),
        (
            ["-m", "+experiment=frameworks_gpu", "framework.prng=rbg"],
            "framework=jax only",
            "framework=tf,torch",
        ),
        (["+experiment=accuracy_ssd", "model.depth=3"], "model=resnet50,resnet_cifar", "model=ssd300"),
    ],
)
def test_a_key_of_another_option_is_one_line_naming_the_options_that_have_it(argv, owners, composed):
    register_configs()
    refused = check_overrides(argv)
    assert f"is a key of {owners}" in refused and f"this command composes {composed}:" in refused
    assert "\n" not in refused


def test_a_key_of_the_chosen_option_or_a_sweep_function_passes():
    register_configs()
    assert check_overrides(["framework=jax", "framework.prng=threefry2x32"]) is None
    assert (
        check_overrides(["-m", "+experiment=frameworks_gpu", "framework=jax", "framework.prng=rbg"]) is None
    )
    assert check_overrides(["model=ssd300", "model.depth=3"]) is not None
    assert check_overrides(["framework=choice(jax)", "framework.prng=rbg"]) is None  # Hydra's to read
    assert check_overrides(["~framework.prng"]) is None


def test_known_keys_groups_hydra_keys_and_flag_values_pass():
    register_configs()
    argv = ["-m", "framework=tf,torch", "+experiment=smoke", "model.depth=8", "~model.depth", "threads=2",
            "hydra.sweep.dir=/x", "--cfg", "job", "tracking.uri=sqlite:///a.db", "hydra/launcher=submitit_local",
            "resume=true", "guard.exclusive=true", "model=resnet50", "precision=fp32,amp", "tracking=server",
            "framework=choice(tf,torch)"]  # fmt: skip
    assert check_overrides(argv) is None
    assert check_overrides(["--config-dir", "extra", "model=mine"]) is None  # options from elsewhere


def test_threads_default_to_the_affinity_and_reach_every_framework_env():
    assert resolve(None) == available_cpus() == len(os.sched_getaffinity(0))
    assert thread_env("mxnet", 3) == {"OMP_NUM_THREADS": "3", "MXNET_CPU_WORKER_NTHREADS": "3"}
    assert thread_env("torch", 3)["OMP_NUM_THREADS"] == "3"
    assert thread_env("tf", 3)["TF_NUM_INTRAOP_THREADS"] == "3"


def test_a_jax_worker_reserves_no_gpu_memory_up_front_unless_the_user_says(monkeypatch):
    """XLA grabs 75% of the GPU at start unless told not to: the worker's environment says false, beside
    its threads, and a value the user set wins; other frameworks get nothing of the kind."""
    monkeypatch.delenv("XLA_PYTHON_CLIENT_PREALLOCATE", raising=False)
    env = worker_env("jax", 3)
    assert env["XLA_PYTHON_CLIENT_PREALLOCATE"] == "false" and env["OMP_NUM_THREADS"] == "3"
    assert "XLA_PYTHON_CLIENT_PREALLOCATE" not in worker_env("torch", 3)
    assert worker_env("tf", 3) == thread_env("tf", 3)
    monkeypatch.setenv("XLA_PYTHON_CLIENT_PREALLOCATE", "true")
    assert "XLA_PYTHON_CLIENT_PREALLOCATE" not in worker_env("jax", 3)  # the user's "true" stays


def test_a_plain_postgresql_uri_is_told_the_installed_driver(tmp_path):
    from dlbench.tracking.store import StoreError, open_store

    with pytest.raises(StoreError) as refused:
        open_store("postgresql://u:pw123@127.0.0.1:9/db?password=pw456", "dlbench")
    message = str(refused.value)
    assert "use postgresql+psycopg2://u:***@127.0.0.1:9/db?password=***" in message
    assert "pw123" not in message and "pw456" not in message and "\n" not in message


@pytest.mark.parametrize(
    ("override", "key", "value"),
    [
        ("tracking.uri='postgresql://u:pw1@h:9/db?password=pw2'", "tracking.uri", "postgresql://u:pw1@h:9/db?password=pw2"),
        ("tracking.uri=http://u:pw3@127.0.0.1:9/", "tracking.uri", "http://u:pw3@127.0.0.1:9/"),
        ('dataset.path="https://h/x?X-Amz-Signature=s1&token=t2&v=1"', "dataset.path", "https://h/x?X-Amz-Signature=s1&token=t2&v=1"),
    ],
)  # fmt: skip
def test_a_secret_hidden_from_hydra_is_resolved_for_the_job(compose, monkeypatch, override, key, value):
    from omegaconf import OmegaConf

    for i in range(1, 10):  # absent again after the test
        monkeypatch.delenv(f"{HIDDEN_ENV}{i}", raising=False)
    (hidden,) = hide_in_overrides([override])
    assert not any(part in hidden for part in ("pw1", "pw2", "pw3", "s1&", "t2")) and "${oc.env:" in hidden
    assert "***" in mask(hidden) and "oc.env" not in mask(hidden)  # how it is shown
    cfg = OmegaConf.to_container(compose([hidden]), resolve=True)
    group, name = key.split(".")
    assert cfg[group][name] == value
    assert hide_in_overrides(["-m", "model=vgg16", hidden]) == ["-m", "model=vgg16", hidden]  # once only


def test_the_ui_link_carries_no_credentials_and_no_query():
    from dlbench.tracking.ui_records import ui_url

    link = ui_url("https://u:pw3@mlflow.example:8443/base/?token=t9", "7")
    assert link == "https://mlflow.example:8443/base/#/experiments/7/runs?workflowType=machine_learning"


def test_a_sweep_link_shows_its_view_key_and_still_hides_secrets():
    from dlbench.tracking.ui_records import ui_url

    link = ui_url("https://u:pw3@mlflow.example:8443/?token=t9", "7", view_key="0f3a9c")
    assert link.endswith("#/experiments/7/runs?workflowType=machine_learning&viewStateShareKey=0f3a9c")
    assert mask(link) == link  # the key names an experiment tag: printed as it is, or the link is useless
    assert mask(f"{link}&apiKey=k1&viewstatesharekey=k2") == f"{link}&apiKey=***&viewstatesharekey=***"


def test_a_sweep_mixing_serving_and_training_shows_both_columns_fastest_first():
    from dlbench.tracking.ui_records import sweep_view

    mixed = sweep_view("p1", ["train", "serve"])
    assert (mixed["orderByKey"], mixed["orderByAsc"]) == ("metrics.`throughput`", False)
    assert {"metrics.`throughput`", "metrics.`latency_p90_ms`", "tags.`serve.valid`"} <= set(
        mixed["selectedColumns"]
    )
    assert "metrics.`latency_p90_ms`" not in sweep_view("p1", ["train", "infer"])["selectedColumns"]


@pytest.mark.parametrize(
    ("override", "char", "fixed"),
    [
        ("dataset.path=/data/café", "'é'", "\"dataset.path='/data/café'\""),
        ("tracking.uri=http://h:5000/?a=1", "mismatched input '='", "\"tracking.uri='http://h:5000/?a=1'\""),
        ("dataset.path=/it's/é", '"\'"', "'dataset.path=\"/it's/é\"'"),
    ],
)
def test_a_value_hydra_cannot_read_is_one_line_with_the_quoting_fix(override, char, fixed):
    register_configs()
    refused = check_overrides(["-m", override])
    assert char in refused and fixed in refused and "\n" not in refused
    assert check_overrides(["-m", fixed[1:-1]]) is None  # the fix (what the shell passes on) is accepted
