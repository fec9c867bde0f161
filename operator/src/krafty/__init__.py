"""krafty: run Apache Kafka (KRaft) on Kubernetes."""
