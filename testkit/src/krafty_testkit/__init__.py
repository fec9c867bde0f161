"""Test fixtures for krafty: real Kafka, real Kubernetes, no fakes."""
