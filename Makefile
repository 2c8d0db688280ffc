# Daily commands. Each target sets up the virtual environment first if needed (scripts/setup/setup_env.sh).
VENV ?= .venv
PY := $(VENV)/bin/python
# The default sweep: every framework at FP32 and mixed precision, on the quick preset; without an
# NVIDIA GPU, on the CIFAR ResNet-20 (quick_cpu) so that it finishes in minutes.
HAVE_GPU := $(shell nvidia-smi -L >/dev/null 2>&1 && echo yes)
ifeq ($(HAVE_GPU),yes)
SWEEP ?= -m framework=tf,torch,mxnet precision=fp32,amp +experiment=quick
else
SWEEP ?= -m framework=tf,torch,mxnet precision=fp32,amp +experiment=quick_cpu
endif

# The tests that run framework arithmetic across frameworks (and the end-to-end sweeps), selected by name.
CROSS ?= mxnet or framework or capability or parity or contract or cannot_run
# oneDNN (inside torch, TF and MXNet) and torch's own kernels capped to AVX2: an AVX-512 machine then computes
# like an AVX2-only laptop (tests/unit/test_capability.py checks that MXNet's bundled oneDNN obeys the cap;
# TensorFlow picks its bfloat16 kernels by the CPU's flags instead, so its amp cells are not run under it).
AVX2 := ONEDNN_MAX_CPU_ISA=AVX2 DNNL_MAX_CPU_ISA=AVX2 ATEN_CPU_CAPABILITY=avx2

.PHONY: setup run test test-fast test-avx2 lint format ui report parity clean server server-stop coco-easy

setup:
	@DLBENCH_VENV=$(VENV) scripts/setup/setup_env.sh

run: setup
	$(PY) src/run.py $(SWEEP)

test: setup
	$(PY) -m pytest -q --durations=25  # the slowest tests listed last: where the suite's time goes

test-fast: setup
	$(PY) -m pytest -q -m "not slow"

test-avx2: setup
	$(AVX2) $(PY) -m pytest -q -k "$(CROSS)"

lint: setup
	$(VENV)/bin/ruff check src tests scripts yardsticks
	$(VENV)/bin/ruff format --check src tests scripts yardsticks

format: setup
	$(VENV)/bin/ruff format src tests scripts yardsticks
	$(VENV)/bin/ruff check --fix src tests scripts yardsticks

ui: setup
	$(VENV)/bin/mlflow ui --backend-store-uri sqlite:///$(CURDIR)/mlflow.db --host 127.0.0.1 --port 5000

# A shared MLflow server: PostgreSQL + `mlflow server` on loopback (scripts/setup/server.sh; DLBENCH_SERVER_AUTH=1
# for basic auth). Prints the URI; sweeps then use `tracking=server`.
server: setup
	@DLBENCH_VENV=$(VENV) scripts/setup/server.sh start

server-stop:
	@scripts/setup/server.sh stop

report: setup
	$(PY) src/report.py

parity: setup
	$(PY) scripts/tools/parity.py

# The easy generated COCO set +experiment=accuracy_ssd trains on (conf/experiment/accuracy_ssd.yaml says why).
coco-easy: setup
	$(PY) scripts/datasets/make_coco_dataset.py --out data/coco_easy --train 1024 --val 128 --objects shapes \
		--classes 3 --max-objects 1 --object-size 0.4 0.8 --plain

clean:
	rm -rf outputs multirun .pytest_cache .ruff_cache
