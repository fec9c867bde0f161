# Developer entry point. Every target installs what it needs first (cached
# under $KRAFTY_CACHE, outside the work tree), so each works on a fresh machine.
SHELL := /bin/bash
.SHELLFLAGS := -euo pipefail -c
ENV := source scripts/env.sh &&
PYTEST := python -m pytest

.PHONY: help setup lint unit integration test

help:  ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | sed -E 's/:.*## /\t/' | expand -t 18

setup:  ## Python venv, Kafka distribution (cached)
	@$(ENV) echo "venv: $$KRAFTY_VENV"; echo "kafka: $$KRAFTY_KAFKA_HOME"

lint:  ## ruff, mypy --strict, import-linter
	@$(ENV) $(PYTEST) -q operator/tests/unit/test_static_checks.py

unit:  ## pure logic: models, rendering, decisions, wire format
	@$(ENV) $(PYTEST) -q operator/tests/unit

integration:  ## real Kafka processes, a real API server, PySpark against real brokers
	@$(ENV) $(PYTEST) -q testkit/tests operator/tests/integration spark/tests

test: unit integration  ## what CI runs (.ci/run)
