"""The compat layers' security settings, as kafka-python and confluent-kafka users write them: SASL SCRAM over
TLS through the gateway in front of Tansu, with the original library's argument / property names.

How it works: the same settings are given to the original library and to its compat layer; both produce
through a TLS + SCRAM gateway (``support.gateway``); the records are read back from Tansu directly and the
gateway's counters show that every client logged in over TLS and none was refused.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import kafka
import pytest
from confluent_kafka import Producer as ConfluentProducer

from sparkafka.broker import EmbeddedBroker
from sparkafka.compat.confluent import Producer as CompatProducer
from sparkafka.compat.kafka_python import KafkaProducer as CompatKafkaProducer
from support.consume import consume_all
from support.gateway import Certificates, Gateway

from .helpers import PASSWORD, USER, USERS

pytestmark = [pytest.mark.timeout(120)]


def test_kafka_python_sasl_ssl_arguments(gateway: Callable[..., Gateway], certs: Certificates, tansu: EmbeddedBroker,
                                         unique_topic: Callable[[str], str]) -> None:
    gw = gateway(users=USERS, tls=certs.server_context())
    arguments: dict[str, Any] = {"bootstrap_servers": gw.bootstrap, "security_protocol": "SASL_SSL",
                                 "sasl_mechanism": "SCRAM-SHA-256", "sasl_plain_username": USER,
                                 "sasl_plain_password": PASSWORD, "ssl_cafile": str(certs.ca)}
    topics = []
    for factory in (kafka.KafkaProducer, CompatKafkaProducer):
        topic = unique_topic("kp-sasl")
        producer = factory(**arguments)
        try:
            for i in range(5):
                producer.send(topic, b"v%d" % i, key=b"k%d" % i).get(timeout=30)
        finally:
            producer.close()
        topics.append(topic)
    read = [sorted((r.key, r.value, r.partition) for r in consume_all(tansu.bootstrap_servers, t, 5)) for t in topics]
    assert read[0] == read[1] and len(read[1]) == 5
    assert gw.stats.authentications >= 2 and gw.stats.auth_failures == 0 and gw.stats.tls_failures == 0


def test_confluent_sasl_ssl_properties(gateway: Callable[..., Gateway], certs: Certificates, tansu: EmbeddedBroker,
                                       unique_topic: Callable[[str], str]) -> None:
    gw = gateway(users=USERS, tls=certs.server_context())
    conf = {"bootstrap.servers": gw.bootstrap, "security.protocol": "SASL_SSL", "sasl.mechanisms": "SCRAM-SHA-512",
            "sasl.username": USER, "sasl.password": PASSWORD, "ssl.ca.location": str(certs.ca)}
    topics = []
    for factory in (ConfluentProducer, CompatProducer):
        topic = unique_topic("cf-sasl")
        producer = factory(conf)
        for i in range(5):
            producer.produce(topic, b"v%d" % i, key=b"k%d" % i)
        assert producer.flush(30) == 0
        topics.append(topic)
        if isinstance(producer, CompatProducer):
            producer.close()
    read = [sorted((r.key, r.value, r.partition) for r in consume_all(tansu.bootstrap_servers, t, 5)) for t in topics]
    assert read[0] == read[1] and len(read[1]) == 5
    assert gw.stats.authentications >= 2 and gw.stats.auth_failures == 0 and gw.stats.tls_failures == 0
