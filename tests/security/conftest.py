"""Fixtures of the security tests: a throwaway PKI, TLS/SASL gateways in front of Tansu, a secret scan.

How it works: ``certs`` is made once per session. ``gateway(**options)`` starts a ``support.gateway``
Gateway in front of the shared ``tansu`` broker and stops it after the test. The autouse
``no_secret_in_logs`` fixture captures every log record at DEBUG during the test and fails the test if
any of the known secrets (``helpers.SECRETS``) appears in a message or a logged traceback; tests scan the
exceptions they provoke with ``helpers.exception_texts``.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from sparkafka.broker import EmbeddedBroker
from support.gateway import Certificates, Gateway, make_certificates

from .helpers import KEY_PASSWORD, secrets_in


@pytest.fixture(scope="session")
def certs(tmp_path_factory: pytest.TempPathFactory) -> Certificates:
    pytest.importorskip("cryptography", reason="the security tests make certificates with `cryptography`")
    return make_certificates(Path(tmp_path_factory.mktemp("pki")), client_key_password=KEY_PASSWORD)


@pytest.fixture
def gateway(tansu: EmbeddedBroker) -> Iterator[Callable[..., Gateway]]:
    started: list[Gateway] = []

    def start(**options: Any) -> Gateway:
        gw = Gateway(tansu.bootstrap_servers, **options).start()
        started.append(gw)
        return gw

    yield start
    for gw in started:
        gw.stop()


@pytest.fixture(autouse=True)
def no_secret_in_logs(caplog: pytest.LogCaptureFixture) -> Iterator[None]:
    caplog.set_level(logging.DEBUG)
    yield
    formatter = logging.Formatter()
    leaks: list[str] = []
    for when in ("setup", "call", "teardown"):
        for record in caplog.get_records(when):
            text = record.getMessage()
            if record.exc_info:
                text += formatter.formatException(record.exc_info)
            found = secrets_in(text)
            if found:
                leaks.append(f"{record.name}: {text[:300]}")
    assert not leaks, f"secrets in log records: {leaks}"
