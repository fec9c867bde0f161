# Sourced by the Makefile's recipes and the CI script: the Python venv, the
# Kafka distribution and the project's source folders, ready to use.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
"$KRAFTY_ROOT/scripts/setup-system.sh"
KRAFTY_VENV="$("$KRAFTY_ROOT/scripts/setup-python.sh")"
KRAFTY_KAFKA_HOME="$("$KRAFTY_ROOT/broker-image/fetch-kafka.sh")"
PATH="$KRAFTY_VENV/bin:$PATH"
PYTHONPATH="$KRAFTY_ROOT/operator/src:$KRAFTY_ROOT/testkit/src:$KRAFTY_ROOT/spark/src${PYTHONPATH:+:$PYTHONPATH}"
export KRAFTY_VENV KRAFTY_KAFKA_HOME PATH PYTHONPATH
