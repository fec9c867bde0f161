# Developer entry point. Every target installs what it needs first (cached
# under $KRAFTY_CACHE, outside the work tree), so each works on a fresh machine.
SHELL := /bin/bash
.SHELLFLAGS := -euo pipefail -c
ENV := source scripts/env.sh &&
PYTEST := python -m pytest
# when this make started (epoch seconds): e2e's time budget counts from it, so `make test` ends with a verdict
ifndef KRAFTY_RUN_STARTED
export KRAFTY_RUN_STARTED := $(shell date +%s)
endif
# where this run notes the first builds it waits for (krafty_testkit.budget): the budget leaves them out
ifndef KRAFTY_RUN_BUILDS
export KRAFTY_RUN_BUILDS := $(or $(TMPDIR),/tmp)/krafty-run-$(KRAFTY_RUN_STARTED).builds
endif

.PHONY: help setup lint unit integration e2e e2e-full test test-full bench bench-smoke bench-e2e demo demo-down cluster-up cluster-down docs docs-screenshots

help:  ## list the targets
	@grep -E '^[a-z0-9-]+:.*## ' $(MAKEFILE_LIST) | sed -E 's/:.*## /\t/' | expand -t 18

setup:  ## Python venv, Kafka distribution (cached)
	@$(ENV) echo "venv: $$KRAFTY_VENV"; echo "kafka: $$KRAFTY_KAFKA_HOME"

docs:  ## the documentation site (MkDocs, strict: a broken link fails it), built into $KRAFTY_CACHE/site
	@$(ENV) NO_MKDOCS_2_WARNING=1 python -m mkdocs build --strict --site-dir "$${KRAFTY_CACHE:-$$HOME/.cache/krafty}/site" \
		&& echo "the site: $${KRAFTY_CACHE:-$$HOME/.cache/krafty}/site/index.html"

docs-screenshots: docs  ## the site's home and API pages photographed with headless Chromium (docs/site-*.png)
	@$(ENV) scripts/docs-screenshots.sh "$${KRAFTY_CACHE:-$$HOME/.cache/krafty}/site"

lint:  ## ruff, mypy --strict, import-linter
	@$(ENV) $(PYTEST) -q operator/tests/unit/repo/test_static_checks.py

unit:  ## pure logic: models, rendering, decisions, wire format
	@$(ENV) $(PYTEST) -q operator/tests/unit

integration:  ## real Kafka processes, a real API server, PySpark against real brokers
	@e2e/localkube/build-k8s.sh  # (built before the tests: a test's time limit would count a first build)
	@$(ENV) $(PYTEST) -q testkit/tests operator/tests/integration spark/tests

e2e:  ## end-to-end on real pods, every capability (the local kind cluster; KRAFTY_E2E_CLUSTER=existing for another)
	@[[ "$${KRAFTY_E2E_CLUSTER:-}" == existing ]] || e2e/localkube/localkube up  # (likewise: up before the tests)
	@$(ENV) KRAFTY_E2E_BUDGET_MINUTES=$${KRAFTY_E2E_BUDGET_MINUTES:-82} \
		$(PYTEST) -q -m "not full" --durations=40 e2e/tests

e2e-full:  ## every end-to-end test, the slow variants too
	@[[ "$${KRAFTY_E2E_CLUSTER:-}" == existing ]] || e2e/localkube/localkube up
	@$(ENV) KRAFTY_E2E_BUDGET_MINUTES=$${KRAFTY_E2E_BUDGET_MINUTES:-300} $(PYTEST) -q --durations=40 e2e/tests

test: unit integration bench-smoke e2e  ## what CI runs (.ci/run): every tier, and each local benchmark at its smallest size

test-full: unit integration e2e-full  ## every tier with the full end-to-end set

bench:  ## benchmarks on local processes (printed tables)
	@$(ENV) $(PYTEST) -q -m bench bench

bench-smoke:  ## every local benchmark at its smallest size: that it runs and prints its table (no figure to keep)
	@$(ENV) KRAFTY_BENCH_SMOKE=1 $(PYTEST) -q -m bench bench

bench-e2e:  ## benchmarks on the local Kubernetes cluster (rolls under load, by zone, of 1,000 partitions a broker, gated by the canary, the data path, readiness, a restarted pod's pace, footprint, leader election)
	@$(ENV) $(PYTEST) -q -m bench e2e/bench

demo:  ## the main job: cluster, operator, Kafka, topics, events, Spark on the cluster, results, metrics
	@$(ENV) python scripts/demo.py

demo-down:  ## remove what `make demo` created (the Kubernetes cluster stays up)
	@$(ENV) python scripts/demo.py down

cluster-up:  ## the local Kubernetes cluster: kind, a control plane and three workers in three zones
	@e2e/localkube/localkube up

cluster-down:
	@e2e/localkube/localkube down
