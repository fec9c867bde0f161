"""Pure rendering: a KafkaCluster (spec plus the few facts the operator persists)
to the Kubernetes objects and Kafka configuration that run it."""
