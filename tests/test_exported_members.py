import sparkafka


def test_public_names() -> None:
    assert set(sparkafka.__all__) == {
        "ArrowSendResult", "ConsumerGroupMetadata", "DeliveryReport", "FailedFuture", "FutureRecordMetadata",
        "KafkaProducer", "OffsetRange", "Partitioner", "ProducerConfig", "ProducerInterceptor", "ProducerRecord",
        "RecordMetadata", "__version__", "errors"}
    for name in sparkafka.__all__:
        assert hasattr(sparkafka, name), name
        assert name in dir(sparkafka), name


def test_public_names_are_the_classes_the_producer_hands_out() -> None:
    from sparkafka.producer.arrow.report import ArrowSendResult, DeliveryReport
    from sparkafka.producer.partitioner import Partitioner
    from sparkafka.producer.producer import KafkaProducer

    assert (sparkafka.KafkaProducer, sparkafka.Partitioner) == (KafkaProducer, Partitioner)
    assert (sparkafka.ArrowSendResult, sparkafka.DeliveryReport) == (ArrowSendResult, DeliveryReport)
