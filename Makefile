# Each target sets itself up on a fresh machine: a .venv at the repo root.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: test test-stressed check lint fuzz demo bench nightly install tokenizer clean debian-deps

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[dev,torch]'
	touch $(STAMP)

# The native read loop (loadtests/dataplane/_native.c) with the system's C compiler; without one the
# build says so and the load tests use the Python plane (the client tests then fail for want of it).
NATIVE := $(VENV)/.native
$(NATIVE): loadtests/dataplane/_native.c setup.py $(STAMP)
	@command -v cc >/dev/null || [ "$$(id -u)" != 0 ] || { export DEBIAN_FRONTEND=noninteractive; \
		apt-get update -qq && apt-get install -y -qq --no-install-recommends gcc libc6-dev; }
	$(BIN)/python setup.py -q build_ext --inplace
	touch $(NATIVE)

# Real Prometheus, Pushgateway and Docker daemon for the tests, and a static busybox to build a
# test image from, and Chromium to open the HTML reports headless, docker-compose and debootstrap for
# the compose stack, and the kernel lab's kernels, user-mode Linux or QEMU (sch_netem, sch_prio, ifb: tests/
# system/kernel_lab.py), with kmod's insmod and iproute2's netem tables (Debian packages). The tests start
# them on their own; a temporary policy-rc.d (exit 101) keeps the postinst from starting services.
# And gcc for the native read loop, so that its rule has no apt-get of its own to run beside this one.
DEBIAN_DEPS := prometheus prometheus-pushgateway docker.io busybox-static chromium docker-compose debootstrap \
	user-mode-linux kmod iproute2 qemu-system-x86 gcc libc6-dev
debian-deps:
	@if command -v prometheus >/dev/null && command -v prometheus-pushgateway >/dev/null && command -v cc >/dev/null \
		&& command -v dockerd >/dev/null && dpkg -s busybox-static >/dev/null 2>&1 \
		&& command -v chromium >/dev/null && command -v docker-compose >/dev/null \
		&& command -v debootstrap >/dev/null && command -v linux.uml >/dev/null \
		&& command -v insmod >/dev/null && dpkg -s iproute2 >/dev/null 2>&1 && command -v qemu-system-x86_64 >/dev/null; then exit 0; fi; \
	if [ "$$(id -u)" != 0 ]; then \
		echo "debian-deps: not root, skipping; install $(DEBIAN_DEPS) by hand" >&2; exit 0; fi; \
	set -e; made=; \
	if [ ! -e /usr/sbin/policy-rc.d ]; then \
		printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d; chmod +x /usr/sbin/policy-rc.d; made=1; fi; \
	trap '[ -z "$$made" ] || rm -f /usr/sbin/policy-rc.d' EXIT; \
	export DEBIAN_FRONTEND=noninteractive; \
	apt-get update -qq; \
	apt-get install -y -qq --no-install-recommends $(DEBIAN_DEPS)

install: $(STAMP) $(NATIVE)

# Every test runs on JOBS workers at once (most wait on servers and sockets, not on the CPU);
# tests/conftest.py keeps each integration module, the system tier, the kernel lab and the timing
# tests each on one worker, and starts the long groups first. The timing tests run one after another,
# each ahead of the rest in a cpu cgroup of the highest weight (tests/ahead.py), so that the other
# tests get only the CPU a timing test leaves; the kernel lab runs its kernel at real-time priority.
# A timing test that fails runs once more (listed as a rerun in the summary: a defect to fix); one
# that fails twice fails. The 25 slowest tests are listed.
JOBS ?= 4
PYTEST := $(BIN)/python -m pytest -q -p no:cacheprovider
# The Debian packages and the Python ones download and unpack side by side (each about 2 minutes on a
# fresh machine here). Lint (a minute of CPU from cold) runs at nice 19 beside the tests, in the CPU
# the other workers leave while the timing lane finishes; its output follows the tests', and either
# failing fails make test.
test:
	$(MAKE) -j2 --output-sync=target debian-deps $(STAMP)
	$(MAKE) $(NATIVE)
	$(BIN)/llmchaos dashboards build --check
	@nice -n 19 $(MAKE) -s lint > $(VENV)/lint.log 2>&1 & linting=$$!; \
	$(PYTEST) -n $(JOBS) --dist loadgroup --no-loadscope-reorder -r R --durations=25 tests; tested=$$?; \
	wait $$linting; linted=$$?; cat $(VENV)/lint.log; \
	[ $$linted = 0 ] || echo "make test: make lint failed (above)" >&2; \
	[ $$tested = 0 ] && [ $$linted = 0 ]

# The fast tier, for every change: lint, types and the unit tests (tests/unit: in-process, no servers,
# no sleeping), on both cores.
check: lint
	$(PYTEST) -n 2 -m unit tests/unit

# The tests that assert something about time, with a CPU-bound process on every core meanwhile: they
# must hold on a slow, busy machine, not only on a quiet one.
test-stressed: install debian-deps
	$(PYTEST) -m timing --stress tests

# The fuzz tests with many more examples, fresh ones each time (make test runs them with a fixed few).
fuzz: install
	$(PYTEST) -m fuzz --hypothesis-profile=soak tests

lint: $(STAMP) $(NATIVE)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy

demo: install debian-deps
	$(BIN)/python -m compose.demo

# Every benchmark runs even when one misses its target; the target fails if any did.
BENCHMARKS := server_throughput server_memory standin_accuracy client_throughput proxy_overhead hostile_soak torch_batching replay_fidelity compare_large generator_capacity long_context_replay cli_start standin_clients fast_stream router_overhead
bench: install
	@failed=; for b in $(BENCHMARKS); do $(BIN)/python -m benchmarks.$$b || failed="$$failed $$b"; done; \
	if [ -n "$$failed" ]; then echo "bench: missed:$$failed" >&2; exit 1; fi

# The reference server under a fixed per-language load NIGHTLY_RUNS times, gated by `llmchaos regress`
# against NIGHTLY_BASELINE (tonight's runs become it when it is empty); JUnit and HTML next to the runs
# (compose/nightly.py lists the NIGHTLY_* settings; PUSHGATEWAY_URL pushes every run).
nightly: install
	$(BIN)/python -m compose.nightly

tokenizer: $(STAMP)
	$(BIN)/python -m llmchaos.tokenizer

clean:
	rm -rf $(VENV) results
