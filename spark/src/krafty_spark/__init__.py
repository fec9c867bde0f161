"""krafty_spark: a Spark Structured Streaming job over Kafka topics of a krafty KafkaCluster."""
