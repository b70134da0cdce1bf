"""The network layer: the only code in sparkafka that touches sockets.

How it works: ``connection.BrokerConnection`` is one non-blocking TCP connection (connect, ApiVersions
handshake, optional SASL steps, buffered writes, framed reads via the sans-I/O ``protocol.framing``);
``client.NetworkClient`` drives all connections from one selector loop in the Sender thread (readiness,
in-flight limits, deadlines, reconnect backoff, ``wakeup()`` from any thread); ``metadata`` keeps the
producer's ``Cluster`` snapshot fresh through a ``MetadataUpdater``; ``admin.AdminClient`` is a small
blocking helper for tools and tests.
"""
