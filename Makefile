# `make demo` and `make test` each create .venv when missing and install what they need.
# Where no NVIDIA GPU is present, torch is the CPU build (TORCH_CPU_ARGS can point pip at
# the PyTorch CPU wheel index on machines whose pip does not already have it).
# Where one is (nvidia-smi answers), torch is the GPU workers' (cluster/locks/gpu-worker.in says why it is not the
# head's) and mamba-ssm's kernels come as upstream's prebuilt wheels, by their release URLs, never compiled: CUDA 12
# by default, `make KERNEL_CUDA=13` for CUDA 13 (docs/gpus.md, "Installing the kernels"). Then tuning.cluster.gpu_ready
# checks that torch sees the GPU and the kernels import, and says in one line what is wrong when not.

VENV ?= .venv
PY := $(VENV)/bin/python
TORCH_VERSION ?= 2.13.0
TORCH_CPU_ARGS ?=
HAS_NVIDIA := $(shell nvidia-smi -L >/dev/null 2>&1 && echo yes)
STAMP := $(VENV)/.installed
# The GPU install (above): torch and the two kernels' versions, as cluster/locks/gpu-worker.in pins them.
GPU_PIN = $(shell sed -n 's/^$(1)==\([^ ]*\).*/\1/p' cluster/locks/gpu-worker.in)
TORCH_GPU_VERSION ?= $(call GPU_PIN,torch)
MAMBA_SSM_VERSION := $(call GPU_PIN,mamba-ssm)
CAUSAL_CONV1D_VERSION := $(call GPU_PIN,causal-conv1d)
KERNEL_CUDA ?= 12
# The release wheels' names, as upstream's setup.py (get_wheel_url) builds them: +cu<CUDA major>torch<major.minor>,
# then the venv's CPython ($$py, cp310 to cp313: the recipe reads it from the venv, which it may have just made)
KERNEL_WHEEL_TAG = cu$(KERNEL_CUDA)torch$(basename $(TORCH_GPU_VERSION))cxx11abiTRUE-$$py-$$py-linux_x86_64
MAMBA_SSM_WHEEL = https://github.com/state-spaces/mamba/releases/download/v$(MAMBA_SSM_VERSION)/mamba_ssm-$(MAMBA_SSM_VERSION)+$(KERNEL_WHEEL_TAG).whl
CAUSAL_CONV1D_WHEEL = https://github.com/Dao-AILab/causal-conv1d/releases/download/v$(CAUSAL_CONV1D_VERSION)/causal_conv1d-$(CAUSAL_CONV1D_VERSION)+$(KERNEL_WHEEL_TAG).whl
ifeq ($(KERNEL_CUDA),13)
# PyPI has no torch 2.10.0+cu130: PyTorch's cu130 index, for torch alone (its pin names the +cu130 build)
TORCH_GPU = "torch==$(TORCH_GPU_VERSION)+cu130" --extra-index-url https://download.pytorch.org/whl/cu130
else
TORCH_GPU = "torch==$(TORCH_GPU_VERSION)"
endif
# Debian's chromium, for the MLflow UI test (Playwright drives it; no browser is downloaded)
CHROMIUM := /usr/bin/chromium
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)

.PHONY: demo install test test-faults test-load lint bench clean ui docs

$(STAMP): pyproject.toml Makefile
	test -x $(PY) || python3 -m venv $(VENV)
ifeq ($(HAS_NVIDIA),yes)
	case "$(KERNEL_CUDA)" in 12|13) ;; *) echo "error: KERNEL_CUDA=$(KERNEL_CUDA), the kernels' wheels are for CUDA 12 or 13; make KERNEL_CUDA=12 (driver 570+) or 13 (driver 580+)" >&2; exit 2;; esac
	$(PY) -c 'import sys; sys.exit(not (3, 10) <= sys.version_info[:2] <= (3, 13))' || { echo "error: $(VENV) is Python $$($(PY) -c 'import platform; print(platform.python_version())'), the kernels' release wheels are CPython 3.10 to 3.13 (cp310-cp313); rm -rf $(VENV) && python3.11 -m venv $(VENV) && make" >&2; exit 2; }
	$(PY) -m pip install -q $(TORCH_GPU)
	$(PY) -m pip install -q -e '.[dev,bench,data]'
	# the kernels, prebuilt for that torch and CUDA, torch held to it while their requirements resolve: never
	# compiled here (cluster/cuda-wheels.sh build does that)
	py=$$($(PY) -c 'import sys; print("cp%d%d" % sys.version_info[:2])') && \
		$(PY) -m pip install -q $(TORCH_GPU) "$(MAMBA_SSM_WHEEL)" "$(CAUSAL_CONV1D_WHEEL)"
	$(PY) -m tuning.cluster.gpu_ready
else
	$(PY) -m pip install -q "torch==$(TORCH_VERSION)" $(TORCH_CPU_ARGS)
	$(PY) -m pip install -q -e '.[dev,bench,data]'
	# mamba-ssm without its CUDA build: it installs but cannot import here, which the
	# import-guard tests need to see.
	MAMBA_SKIP_CUDA_BUILD=TRUE MAMBA_FORCE_BUILD=TRUE $(PY) -m pip install -q --no-build-isolation --no-deps mamba-ssm
endif
	touch $@

# .venv with what `make demo` installs (the same extras, the same torch), and nothing run
install: $(STAMP)

demo: $(STAMP)
	rm -rf runs/demo
	$(VENV)/bin/mamba-tune data synth --out runs/demo/bars.parquet --bars 3000
	$(VENV)/bin/mamba-tune data check runs/demo/bars.parquet
	$(VENV)/bin/mamba-tune sweep --data runs/demo/bars.parquet --space search_spaces/smoke.yaml --storage runs/demo/sweeps
	$(VENV)/bin/mamba-tune list --storage runs/demo/sweeps
	$(VENV)/bin/mamba-tune best smoke --storage runs/demo/sweeps --out runs/demo/best.yaml \
		--register mamba-forecaster-demo
	$(VENV)/bin/mamba-tune train --data runs/demo/bars.parquet --config runs/demo/best.yaml --out runs/demo/train \
		--look --storage runs/demo/sweeps
	$(VENV)/bin/mamba-tune data synth --out runs/demo/new.parquet --bars 800 --seed 1 --after runs/demo/bars.parquet
	$(VENV)/bin/mamba-tune promote mamba-forecaster-demo --data runs/demo/new.parquet
	@echo "browse the sweep and its trials: .venv/bin/mamba-tune ui smoke (or make ui)"

ui: $(STAMP)
	$(VENV)/bin/mamba-tune ui

$(CHROMIUM):
	$(SUDO) apt-get install -y -q chromium || ($(SUDO) apt-get update -q && $(SUDO) apt-get install -y -q chromium)

# PostgreSQL's server programs, for the tests that start one (tests/postgres_server.py); Debian keeps them
# in /usr/lib/postgresql/VERSION/bin, off the PATH. The tests start and stop their own server.
.PHONY: postgres-programs
postgres-programs:
	command -v initdb >/dev/null || ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || \
		$(SUDO) apt-get install -y -q postgresql || ($(SUDO) apt-get update -q && $(SUDO) apt-get install -y -q postgresql)

# Three tiers (README, Tests); CI (.ci/run) runs all three.
# The everyday tier: everything but the fault and cluster tests, one real sweep end to end among them.
test: $(STAMP) $(CHROMIUM)
	$(PY) -m pytest -q -m "not load and not faults"

# Faults and clusters: kills, outages, head loss, disk faults, bad and unsafe input (tests/reliability), the
# multi-node Ray started with `ray start` (tests/cluster), and the tests elsewhere marked `faults`.
test-faults: $(STAMP) postgres-programs
	$(PY) -m pytest -q -m "faults and not load"

# The load test (tests/reliability/test_load.py: 64 trials).
test-load: $(STAMP)
	$(PY) -m pytest -q -m load tests/reliability/test_load.py

# docs/space-keys.md, generated from the dataclasses that read a search space (a test fails when it is stale).
docs: $(STAMP)
	$(VENV)/bin/mamba-tune space keys --markdown > docs/space-keys.md

lint: $(STAMP)
	$(VENV)/bin/ruff check .

bench: $(STAMP)
	$(PY) bench/model_throughput.py
	$(PY) bench/train_epoch.py
	$(PY) bench/data_pipeline.py
	$(PY) bench/driver_memory.py
	$(PY) bench/sweep_overhead.py
	$(PY) bench/trial_start.py
	$(PY) bench/actor_start.py
	$(PY) bench/search_efficiency.py
	$(PY) bench/training_outcomes.py
	$(PY) bench/forecast_quality.py
	$(PY) bench/objectives.py
	$(PY) bench/linear_reference.py
	$(PY) bench/leverage_walk_forward.py
	$(PY) bench/model_walk_forward.py

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache

# A locked install, the one the images run (deploy/Dockerfile; docs/kubernetes.md): LOCK's exact versions and sha256
# hashes into VENV, wheels only (nothing is built), then this project on top with --no-deps, so that nothing outside
# the lock comes in. KERNELS=yes adds mamba-ssm's CUDA kernels, the prebuilt wheels cluster/locks/cuda-kernels.txt
# pins (cluster/cuda-wheels.sh install, which installs into ~/venv from ~/mamba-tune-wheels: VENV must be ~/venv).
# Two steps, which `make install-locked` runs in turn: the image runs them apart, the dependencies (the lock, the
# Makefile) in a layer before the source is copied, so a code change rebuilds only the project's small layer.
# cluster.yaml spells the same pip commands out: a node's setup runs before make can be counted on.
LOCK ?= cluster/locks/head.txt
KERNELS ?= no

.PHONY: install-locked install-locked-deps install-project
install-locked: install-locked-deps install-project
# In that order, even under `make -j`: the project installs into the venv its dependencies' step made.
.NOTPARALLEL:

install-locked-deps:
ifeq ($(KERNELS),yes)
	test "$(abspath $(VENV))" = "$(HOME)/venv" || (echo "KERNELS=yes: VENV must be ~/venv (cluster/cuda-wheels.sh)" >&2; exit 2)
endif
	test -x $(VENV)/bin/python || python3.11 -m venv $(VENV)
	$(VENV)/bin/pip install -q --require-hashes --only-binary :all: -r $(LOCK)
ifeq ($(KERNELS),yes)
	bash cluster/cuda-wheels.sh install
endif

# Non-editable: the image's code is the installed copy, whatever the working folder holds.
install-project:
	$(VENV)/bin/pip install -q --no-deps --no-build-isolation .

# The cluster's locks (cluster.yaml installs them with --require-hashes): exact versions and sha256
# hashes for linux x86_64, CPython 3.11, wheels only. The head's (pyproject's dependencies and
# cluster/locks/head.in) is compiled first; the GPU workers' and the cpu image's against it as constraints,
# so all agree on every package they share, torch's CUDA build on the GPU workers excepted (below).
# Kept pins stay; `make lock LOCK_ARGS=--upgrade` moves them on.
# The GPU workers' torch differs (gpu-worker.in says why): gpu-worker.txt takes head.txt's versions for every other
# package they share; its constraints are head.txt less torch and what torch's CUDA build brings (TORCH_CUDA_BUILD:
# triton, nvidia-*, cuda-*), a file the recipe writes under build/.
# mamba-ssm and causal-conv1d (gpu-worker.in) are resolved for their requirements but not emitted:
# their prebuilt wheels are pinned in cuda-kernels.txt, which cluster/cuda-wheels.sh publish writes.
# cpu.txt (deploy/Dockerfile's cpu image): head.in's packages with PyTorch's CPU build of the same torch, which is
# not on PyPI: uv finds it through TORCH_CPU_SOURCE (only torch's files: every other package still comes from
# PyPI), and the lock's first line tells pip where it is, wherever the lock installs. A machine that cannot reach
# download.pytorch.org: `make lock TORCH_CPU_SOURCE="--find-links DIR"`, DIR holding that same wheel (same hash).
UV_VERSION ?= 0.13.9
LOCK_VENV ?= $(HOME)/.cache/mamba-tune/lock-venv
LOCK_ARGS ?=
TORCH_CPU_PAGE := https://download.pytorch.org/whl/cpu/torch/
TORCH_CPU_SOURCE ?= --find-links $(TORCH_CPU_PAGE)
TORCH_CUDA_BUILD := ^(torch|triton)==|^(nvidia|cuda)-
GPU_WORKER_CONSTRAINTS := build/lock/head-less-torch-cuda.txt
LOCK_COMPILE = $(LOCK_VENV)/bin/uv pip compile --quiet --no-config --generate-hashes --only-binary :all: \
	--python-version 3.11 --python-platform x86_64-manylinux_2_28 --default-index https://pypi.org/simple \
	--custom-compile-command "make lock" $(LOCK_ARGS)

.PHONY: lock
lock: $(LOCK_VENV)/bin/uv
	$(LOCK_COMPILE) pyproject.toml cluster/locks/head.in -o cluster/locks/head.txt
	$(MAKE) --no-print-directory lock-gpu-worker
	$(LOCK_COMPILE) pyproject.toml cluster/locks/cpu.in -c cluster/locks/head.txt $(TORCH_CPU_SOURCE) \
		-o cluster/locks/cpu.txt
	sed -i '1i --find-links $(TORCH_CPU_PAGE)  # torch+cpu: on the PyTorch CPU index, not PyPI (make lock)' \
		cluster/locks/cpu.txt

$(LOCK_VENV)/bin/uv:
	python3 -m venv $(LOCK_VENV) && $(LOCK_VENV)/bin/pip install -q "uv==$(UV_VERSION)"

# gpu-worker.txt alone (make lock runs it after head.txt): head.txt as constraints less torch and what torch's CUDA
# build brings, which gpu-worker.in pins apart (its torch has the kernels' release wheels; head.txt's has none).
.PHONY: lock-gpu-worker
lock-gpu-worker: $(LOCK_VENV)/bin/uv
	mkdir -p $(dir $(GPU_WORKER_CONSTRAINTS))
	grep -E '^[A-Za-z0-9]' cluster/locks/head.txt | sed 's/ .*//' | grep -Ev '$(TORCH_CUDA_BUILD)' \
		> $(GPU_WORKER_CONSTRAINTS)
	$(LOCK_COMPILE) pyproject.toml cluster/locks/gpu-worker.in -c $(GPU_WORKER_CONSTRAINTS) \
		--no-binary mamba-ssm --no-binary causal-conv1d --no-emit-package mamba-ssm --no-emit-package causal-conv1d \
		-o cluster/locks/gpu-worker.txt
