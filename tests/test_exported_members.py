import sparkafka


def test_public_names() -> None:
    assert set(sparkafka.__all__) == {
        "FutureRecordMetadata", "KafkaProducer", "ProducerConfig", "RecordMetadata", "__version__", "errors"}
    for name in sparkafka.__all__:
        assert hasattr(sparkafka, name), name
