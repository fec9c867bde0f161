"""The only modules that talk to the Kubernetes API or to Kafka."""
