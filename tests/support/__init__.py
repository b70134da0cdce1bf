"""Test support: librdkafka's mock cluster (``mock_cluster``) and an independent read-back with
confluent-kafka (``consume``). Imported by tests as ``support.<module>`` (tests/ is on sys.path)."""
