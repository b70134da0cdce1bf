"""``sparkafka pipeline``: a PySpark job that publishes a dataset to Kafka through the sparkafka sink.

How it works: the rows come from ``--input`` (Parquet, CSV or JSON) or, without it, from the
built-in order-event generator (``--rows``, generated inside Spark). ``shape_records`` makes each
row a record: key = ``--key-column`` (default ``order_id``, else the first column), value = JSON of
the row (or ``--value-format raw|avro``), headers = source, schema and content type. The topic is
created if missing (``--partitions``) with ``sparkafka.net.admin``; its end offsets are read before
and after (``AdminClient.end_offsets``: ListOffsets, made exact with a Fetch where a broker's answer
lags, as Tansu's does); these admin calls use the security settings of the producer
configuration (``-X security.protocol=...``). Without ``--bootstrap-servers`` an embedded Tansu broker is
started for the run and stopped at the end. While the write runs, a thread polls the broker's end
offsets each second and prints records/s; at the end a summary gives rows read, records
acknowledged, bytes, throughput, per-partition counts and the end offsets before and after.
``--exactly-once`` writes with ``sparkafka.guarantee=exactly_once`` (``--sink-id`` names the write; a
random one by default): the summary says the guarantee and how many transactions the driver committed.
It needs Apache Kafka (``--bootstrap-servers``): the embedded Tansu broker has no ListTransactions and its
read_committed shows aborted records. The job's own Spark session gets ``--master`` and every ``--conf
KEY=VALUE`` (as spark-submit); only with a local master are the Python workers pointed at this
interpreter (``spark.pyspark.python``). ``--ship`` is ``register``'s ``ship``: executors that cannot
import this sparkafka get a pure-Python copy. ``run_pipeline`` is the same job for programs (the
benchmark uses it).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator, Mapping, MutableMapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, TextIO

from sparkafka.errors import ConfigError, InvalidRecordInputError, KafkaError

DEFAULT_MASTER = "local[2,4]"
"""Two threads, and up to 4 attempts per task (plain ``local[2]`` never retries a failed task)."""
DEFAULT_ROWS = 100_000
DEFAULT_TOPIC = "orders"
DEFAULT_PARTITIONS = 6
_EMBEDDED_EXACTLY_ONCE = ("--exactly-once needs Apache Kafka (--bootstrap-servers): the embedded Tansu broker has no "
                          "ListTransactions and its read_committed shows aborted records")
SHIP_CHOICES: dict[str, bool | None] = {"auto": None, "always": True, "never": False}
"""``--ship`` -> ``register(spark, ship=...)``."""


def add_parser(subparsers: argparse._SubParsersAction[Any]) -> None:
    parser = subparsers.add_parser(
        "pipeline",
        help="publish a dataset (or generated order events) to Kafka with PySpark",
        description="Read a dataset (or generate order events) in Spark and publish every row as a Kafka "
                    "record through the sparkafka sink. Without --bootstrap-servers an embedded Tansu "
                    "broker runs for the duration of the job.",
    )
    src = parser.add_argument_group("input")
    src.add_argument("--input", metavar="PATH", help="Parquet, CSV (with header) or JSON-lines dataset; "
                                                      "default: generated order events")
    src.add_argument("--format", choices=("parquet", "csv", "json"), help="input format (default: from "
                                                                          "the extension)")
    src.add_argument("--rows", type=int, default=DEFAULT_ROWS,
                     help=f"generated rows when there is no --input (default {DEFAULT_ROWS})")
    src.add_argument("--input-partitions", type=int, default=None, metavar="N",
                     help="Spark partitions (tasks) to write from (default: Spark's parallelism)")
    rec = parser.add_argument_group("records")
    rec.add_argument("--key-column", help="column used as the record key (default: order_id, else the first)")
    rec.add_argument("--value-format", choices=("json", "raw", "avro"), default="json",
                     help="json: the whole row as JSON (default); raw: one column as is (--value-column); "
                          "avro: the row as Avro binary")
    rec.add_argument("--value-column", help="the column sent with --value-format raw (default: value)")
    out = parser.add_argument_group("Kafka")
    out.add_argument("--topic", default=DEFAULT_TOPIC, help=f"topic (default {DEFAULT_TOPIC!r}), created if "
                                                            "missing")
    out.add_argument("--partitions", type=int, default=DEFAULT_PARTITIONS,
                     help=f"partitions of a created topic (default {DEFAULT_PARTITIONS})")
    out.add_argument("--bootstrap-servers", metavar="HOST:PORT[,...]",
                     help="Kafka brokers; default: start an embedded Tansu broker for the run")
    out.add_argument("--exactly-once", action="store_true",
                     help="exactly-once: every task writes in a Kafka transaction the driver commits once Spark "
                          "decided the write succeeded (needs Apache Kafka; read with isolation.level="
                          "read_committed)")
    out.add_argument("--sink-id", metavar="ID", help="with --exactly-once: the write's stable id (a run with the "
                     "id of a write that committed sends nothing; default: random)")
    out.add_argument("-X", "--producer-config", action="append", default=[], metavar="KEY=VALUE",
                     help="a producer setting, Java name (e.g. -X linger.ms=20); repeatable")
    run_group = parser.add_argument_group("run")
    run_group.add_argument("--master", default=DEFAULT_MASTER,
                           help=f"Spark master (default {DEFAULT_MASTER})")
    run_group.add_argument("--conf", action="append", default=[], metavar="KEY=VALUE",
                           help="a Spark configuration property, as spark-submit's --conf (repeatable)")
    run_group.add_argument("--ship", choices=tuple(SHIP_CHOICES), default="auto",
                           help="send the executors a pure-Python copy of sparkafka: auto (when they cannot import "
                                "this version; the default), always, never")
    run_group.add_argument("--no-progress", action="store_true", help="do not print progress while running")
    run_group.add_argument("--summary-json", metavar="PATH", help="also write the summary as JSON to PATH")


@dataclass
class PipelineResult:
    """What one run did."""

    topic: str
    bootstrap_servers: str
    embedded_broker: bool
    rows: int
    acknowledged: int
    bytes: int
    seconds: float
    value_format: str
    avro_encoder: str | None = None
    avro_schema: str | None = None
    """The Avro writer schema (JSON) when the built-in encoder wrote the values."""
    partition_counts: dict[int, int] = field(default_factory=dict)
    """Records acknowledged per partition (from the tasks' commit messages)."""
    acked_offsets: dict[int, list[int]] = field(default_factory=dict)
    """``partition -> [first, last]`` acknowledged offsets (from the commit messages)."""
    offsets_before: dict[int, int] = field(default_factory=dict)
    offsets_after: dict[int, int] = field(default_factory=dict)
    retried_tasks: int = 0
    guarantee: str = "at_least_once"
    transactions: int = 0
    """Exactly-once: the transactions the driver committed."""
    status: str = "committed"
    """``committed``, or ``skipped`` (exactly-once: the sink id's write was committed by an earlier run)."""
    sink_id: str | None = None

    @property
    def records_per_second(self) -> float:
        return self.acknowledged / self.seconds if self.seconds > 0 else 0.0

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["records_per_second"] = round(self.records_per_second, 1)
        return data


def _parse_producer_config(pairs: Sequence[str]) -> dict[str, str]:
    config: dict[str, str] = {}
    for pair in pairs:
        name, sep, value = pair.partition("=")
        if not sep or not name.strip():
            raise ConfigError(f"-X expects KEY=VALUE, got {pair!r}", "producer-config")
        name = name.strip()
        if name.startswith("kafka."):
            name = name[len("kafka."):]
        config[name] = value
    return config


class ProgressPrinter:
    """Polls the topic's end offsets every ``interval`` s and prints records/s (own admin client)."""

    def __init__(self, bootstrap: str, topic: str, before: Mapping[int, int], out: TextIO = sys.stderr,
                 interval: float = 1.0, security: Mapping[str, str] | None = None) -> None:
        self._bootstrap = bootstrap
        self._security = security
        self._topic = topic
        self._before = dict(before)
        self._out = out
        self._interval = interval
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="sparkafka-pipeline-progress", daemon=True)
        self.last_count = 0
        self._printed = False

    def __enter__(self) -> ProgressPrinter:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(5.0)
        if self._printed and self._out.isatty():
            print(file=self._out, flush=True)

    def _run(self) -> None:
        from sparkafka.net.admin import AdminClient

        started = last_t = time.monotonic()
        last = 0
        tty = self._out.isatty()
        first = "  waiting for the first records (Spark is planning and starting)"
        print(("\r" + first) if tty else first, end="" if tty else "\n", file=self._out, flush=True)
        self._printed = True
        with AdminClient(self._bootstrap, security=self._security or None) as admin:
            while not self._stop.wait(self._interval):
                try:
                    offsets = admin.end_offsets(self._topic, timeout_ms=max(500.0, self._interval * 1000))
                except (KafkaError, OSError):
                    continue
                now = time.monotonic()
                count = sum(end - self._before.get(p, 0) for p, end in offsets.items())
                rate = (count - last) / (now - last_t) if now > last_t else 0.0
                if count == 0:
                    line = f"  waiting for the first records ({now - started:.0f} s; Spark is planning and starting)"
                else:
                    line = (f"  {count:>12,} records in Kafka  {rate:>10,.0f} records/s now  "
                            f"{count / (now - started):>10,.0f} records/s overall")
                print(("\r" + line) if tty else line, end="" if tty else "\n", file=self._out, flush=True)
                self._printed = True
                self.last_count, last, last_t = count, count, now


def is_local_master(master: str) -> bool:
    """``local``, ``local[...]`` and ``local-cluster[...]`` run every executor on this machine."""
    m = master.strip()
    return m == "local" or m.startswith(("local[", "local-cluster["))


def parse_spark_conf(pairs: Sequence[str], err: TextIO | None = None) -> dict[str, str]:
    """``--conf KEY=VALUE`` pairs as spark-submit reads them (``SparkSubmitArguments``): a pair without
    ``=`` is an error, a key not starting with ``spark.`` is ignored with a warning, the last one wins."""
    conf: dict[str, str] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        key = key.strip()
        if not sep or not key:
            raise ConfigError(f"--conf expects KEY=VALUE, got {pair!r}", "conf")
        if not key.startswith("spark."):
            print(f"sparkafka pipeline: ignoring non-Spark config property: {key}", file=err or sys.stderr)
            continue
        conf[key] = value
    return conf


def session_conf(master: str, conf: Mapping[str, str] | None = None, *,
                 quiet_console: bool = False) -> dict[str, str]:
    """The configuration of the job's own session: the pipeline's defaults, then ``conf`` on top.

    Only with a local master do the Python workers run this interpreter (``spark.pyspark.python`` =
    ``sys.executable``, so they see the same sparkafka and pyarrow); on a cluster that path means nothing
    to the other hosts, so it is left to the cluster's settings (or ``--conf spark.pyspark.python=...``)."""
    settings = {
        "spark.app.name": "sparkafka-pipeline",
        "spark.sql.session.timeZone": "UTC",
        "spark.ui.showConsoleProgress": "false" if quiet_console else "true",
    }
    if is_local_master(master):
        settings["spark.pyspark.python"] = sys.executable
    settings.update(conf or {})
    return settings


def set_worker_python(master: str, conf: Mapping[str, str] | None = None,
                      environ: MutableMapping[str, str] | None = None) -> str | None:
    """Point the Python workers of a session created in this process at the right interpreter.

    A SparkContext started from Python takes its workers' interpreter from the PYSPARK_PYTHON environment
    variable only (``pyspark.core.context``); ``spark.pyspark.python`` works through spark-submit, whose
    launcher turns it into that variable and lets it win over one already set. So a ``--conf
    spark.pyspark.python`` is put there (it wins), and a local master without one gets this interpreter
    unless the variable is set. Returns the variable's value."""
    env = os.environ if environ is None else environ
    explicit = (conf or {}).get("spark.pyspark.python")
    if explicit:
        env["PYSPARK_PYTHON"] = explicit
    elif is_local_master(master):
        env.setdefault("PYSPARK_PYTHON", sys.executable)
    return env.get("PYSPARK_PYTHON")


@contextlib.contextmanager
def _spark_session(master: str, quiet_console: bool, conf: Mapping[str, str] | None = None) -> Iterator[Any]:
    """The active Spark session, or a new one (stopped at the end) configured for this job.

    An active session is used as it is (``conf`` cannot change a running SparkContext)."""
    from pyspark.sql import SparkSession

    active = SparkSession.getActiveSession()
    if active is not None:
        yield active
        return
    settings = session_conf(master, conf, quiet_console=quiet_console)
    set_worker_python(master, conf)
    builder: Any = SparkSession.builder.master(master)
    for key, value in settings.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    try:
        yield spark
    finally:
        spark.stop()


def _make_active(spark: Any) -> None:
    """Make ``spark`` the JVM's active session on this thread: Spark looks a Python data source up in the
    active session, which is per JVM thread and can be unset on a thread that did not create the session
    (seen after other threads came and went in the same process: the write then failed with
    DATA_SOURCE_NOT_FOUND although the source was registered)."""
    jvm = getattr(spark, "_jvm", None)
    jsession = getattr(spark, "_jsparkSession", None)
    if jvm is not None and jsession is not None:  # classic Spark (a Connect session has neither)
        jvm.org.apache.spark.sql.SparkSession.setActiveSession(jsession)


def run_pipeline(
    spark: Any,
    bootstrap: str,
    *,
    input_path: str | None = None,
    input_format: str | None = None,
    rows: int = DEFAULT_ROWS,
    input_partitions: int | None = None,
    key_column: str | None = None,
    value_format: str = "json",
    value_column: str | None = None,
    topic: str = DEFAULT_TOPIC,
    partitions: int = DEFAULT_PARTITIONS,
    producer_config: Mapping[str, str] | None = None,
    progress: TextIO | None = None,
    embedded_broker: bool = False,
    extra_options: Mapping[str, str] | None = None,
    exactly_once: bool = False,
    sink_id: str | None = None,
    ship: bool | None = None,
) -> PipelineResult:
    """Create the topic if needed, write the shaped rows through the sink, and report."""
    from sparkafka.cli.orders import generate_orders, read_input, shape_records
    from sparkafka.net.admin import AdminClient
    from sparkafka.spark import read_summaries, register

    eo_options: dict[str, str] = {}
    if exactly_once:
        sink_id = sink_id if sink_id is not None else f"pipeline-{uuid.uuid4().hex[:12]}"
        eo_options = {"sparkafka.guarantee": "exactly_once", "sparkafka.sink.id": sink_id}
    check_options(bootstrap, topic=topic, partitions=partitions, input_partitions=input_partitions,
                  producer_config=producer_config or {}, exactly_once=exactly_once, sink_id=sink_id,
                  embedded_broker=embedded_broker)
    _make_active(spark)
    register(spark, ship=ship)
    if input_path:
        df = read_input(spark, input_path, input_format)
        if input_partitions:
            df = df.repartition(input_partitions)
        source = os.path.abspath(input_path) if "://" not in input_path else input_path
        schema_name = os.path.splitext(os.path.basename(input_path.rstrip("/")))[0] or "input"
    else:
        df = generate_orders(spark, rows, input_partitions)
        source, schema_name = "sparkafka-generator", "sparkafka.orders.v1"
    shaped = shape_records(df, key_column=key_column, value_format=value_format, value_column=value_column,
                           headers={"source": source, "schema": schema_name})

    security = dict(producer_config or {}) or None  # the admin calls authenticate like the producer
    with AdminClient(bootstrap, security=security) as admin:
        admin.create_topics([(topic, partitions, 1)], exist_ok=True)
        before = admin.end_offsets(topic)

    with tempfile.TemporaryDirectory(prefix="sparkafka-pipeline-") as tmp:
        summary_path = os.path.join(tmp, "summary.jsonl")
        writer = (shaped.df.write.format("sparkafka")
                  .option("kafka.bootstrap.servers", bootstrap)
                  .option("topic", topic)
                  .option("sparkafka.summary.path", summary_path))
        for key, value in (producer_config or {}).items():
            writer = writer.option(f"kafka.{key}", value)
        for key, value in {**eo_options, **(extra_options or {})}.items():
            writer = writer.option(key, value)
        started = time.monotonic()
        with (ProgressPrinter(bootstrap, topic, before, progress, security=security) if progress is not None
              else contextlib.nullcontext()):
            writer.mode("append").save()
        seconds = time.monotonic() - started
        summaries = read_summaries(summary_path)
    if not summaries:
        raise KafkaError("the write finished without a commit summary from the sink")
    summary = summaries[-1]
    with AdminClient(bootstrap, security=security) as admin:
        after = admin.end_offsets(topic)
    counts = {int(tp.rpartition(":")[2]): r[2] for tp, r in summary.partitions.items()}
    acked = {int(tp.rpartition(":")[2]): [r[0], r[1]] for tp, r in summary.partitions.items()}
    return PipelineResult(
        topic=topic, bootstrap_servers=bootstrap, embedded_broker=embedded_broker, rows=summary.rows,
        acknowledged=summary.acknowledged, bytes=summary.bytes, seconds=round(seconds, 3),
        value_format=value_format, avro_encoder=shaped.avro_encoder, avro_schema=shaped.avro_schema,
        partition_counts=dict(sorted(counts.items())), acked_offsets=dict(sorted(acked.items())),
        offsets_before=before, offsets_after=after, retried_tasks=summary.retried_tasks,
        guarantee=summary.guarantee, transactions=summary.transactions, status=summary.status, sink_id=sink_id)


def format_summary(result: PipelineResult) -> str:
    """The human-readable end-of-run report."""
    broker = "embedded Tansu" if result.embedded_broker else "external"
    mb = result.bytes / 1e6
    lines = [
        f"sparkafka pipeline: topic {result.topic!r} on {result.bootstrap_servers} ({broker} broker)",
        f"  rows read             {result.rows:>14,}",
        f"  records acknowledged  {result.acknowledged:>14,}",
        f"  bytes (key+value+hdr) {result.bytes:>14,}  ({mb:,.1f} MB)",
        f"  time                  {result.seconds:>14,.2f} s",
        f"  throughput            {result.records_per_second:>14,.0f} records/s  "
        f"({mb / result.seconds if result.seconds else 0:,.2f} MB/s)",
        f"  value format          {result.value_format}"
        + (f" ({result.avro_encoder} encoder)" if result.avro_encoder else ""),
    ]
    if result.avro_schema:
        lines.append(f"  avro writer schema    {result.avro_schema}")
    exactly_once = result.guarantee == "exactly_once"
    if not exactly_once:
        lines.append("  guarantee             at-least-once")
    elif result.status == "skipped":
        lines.append(f"  guarantee             exactly-once (sink id {result.sink_id}): committed by an earlier run, "
                     "nothing written again")
    else:
        lines.append(f"  guarantee             exactly-once (sink id {result.sink_id}): {result.transactions:,} "
                     "transactions committed; read with isolation.level=read_committed")
    if result.retried_tasks:
        lines.append(f"  retried tasks         {result.retried_tasks:>14,}  " + (
            "(exactly-once: the failed attempts' transactions were aborted)" if exactly_once
            else "(at-least-once: retries may duplicate records)"))
    lines.append("  partition    records   acknowledged offsets" + " " * 13 + "end offset before -> after")
    for p in sorted(set(result.offsets_after) | set(result.partition_counts)):
        first, last = result.acked_offsets.get(p, [-1, -1])
        span = f"{first:,}..{last:,}" if first >= 0 else "-"
        lines.append(f"  {p:>9}  {result.partition_counts.get(p, 0):>9,}   {span:>20}   "
                     f"{result.offsets_before.get(p, 0):>27,} -> {result.offsets_after.get(p, 0):,}")
    added = sum(result.offsets_after.values()) - sum(result.offsets_before.values())
    lines.append(f"  end offsets grew by {added:,} in total")
    if added != result.acknowledged:
        why = ("transaction markers (one per partition and transaction) and aborted attempts take offsets too"
               if exactly_once else "other writers wrote to the topic meanwhile, or failed task attempts left "
               "records that their retries sent again")
        lines.append(f"  note: that is not the {result.acknowledged:,} records acknowledged: {why}")
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    from sparkafka.broker import BrokerStartError, EmbeddedBroker
    from sparkafka.cli.orders import MAX_ROWS, input_format

    try:
        producer_config = _parse_producer_config(args.producer_config)
        spark_conf = parse_spark_conf(args.conf)
        if not 0 <= args.rows <= MAX_ROWS:
            raise ConfigError(f"--rows must be in 0..{MAX_ROWS} (the generated events' created_at, 2 s apart, must "
                              f"stay within Spark's timestamps), got {args.rows}", "rows")
        # what run_pipeline checks again, checked before the broker and the Spark JVM start (a placeholder
        # address stands for the embedded broker's, not known before it starts)
        check_options(args.bootstrap_servers or "127.0.0.1:9092", topic=args.topic, partitions=args.partitions,
                      input_partitions=args.input_partitions, producer_config=producer_config,
                      exactly_once=args.exactly_once, sink_id=args.sink_id,
                      embedded_broker=not args.bootstrap_servers)
        if args.input:
            input_format(args.input, args.format)  # a missing file, found before Spark's JVM starts
        if args.summary_json:
            _check_writable(args.summary_json)
        with contextlib.ExitStack() as stack:
            bootstrap = args.bootstrap_servers
            if not bootstrap:
                broker = stack.enter_context(EmbeddedBroker())
                bootstrap = broker.bootstrap_servers
                print(f"started the embedded Tansu broker at {bootstrap}", file=sys.stderr, flush=True)
            progress = None if args.no_progress else sys.stderr
            spark = stack.enter_context(_spark_session(args.master, quiet_console=progress is not None,
                                                       conf=spark_conf))
            result = run_pipeline(
                spark, bootstrap, input_path=args.input, input_format=args.format, rows=args.rows,
                input_partitions=args.input_partitions, key_column=args.key_column,
                value_format=args.value_format, value_column=args.value_column, topic=args.topic,
                partitions=args.partitions, producer_config=producer_config, progress=progress,
                embedded_broker=not args.bootstrap_servers, exactly_once=args.exactly_once, sink_id=args.sink_id,
                ship=SHIP_CHOICES[args.ship])
    except (ConfigError, InvalidRecordInputError) as exc:
        print(f"sparkafka pipeline: {exc}", file=sys.stderr)
        return 2
    except BrokerStartError as exc:
        print(f"sparkafka pipeline: cannot start the embedded broker: {exc}", file=sys.stderr)
        return 1
    except Exception as exc:  # Spark wraps task errors in its own exceptions: show the message, exit 1
        print(f"sparkafka pipeline failed: {_short(exc)}", file=sys.stderr)
        return 1
    print(format_summary(result), flush=True)
    if args.summary_json:
        try:
            with open(args.summary_json, "w", encoding="utf-8") as f:
                json.dump(result.to_dict(), f, indent=2)
        except OSError as exc:
            print(f"sparkafka pipeline: cannot write --summary-json {args.summary_json!r}: {exc}", file=sys.stderr)
            return 1
    return 0


def check_options(bootstrap: str, *, topic: str, partitions: int, input_partitions: int | None,
                  producer_config: Mapping[str, str], exactly_once: bool, sink_id: str | None,
                  embedded_broker: bool) -> None:
    """The options of a run, checked without Spark or a broker (``run`` calls it before either starts,
    ``run_pipeline`` again); a ``ConfigError`` names the command-line option. The producer settings and the
    exactly-once options go through ``SinkOptions.parse``, as the sink will parse them at ``save()``."""
    from sparkafka._topic import validate_topic_name
    from sparkafka.config import ProducerConfig
    from sparkafka.errors import InvalidTopicNameError
    from sparkafka.spark.options import SinkOptions, check_sink_id

    try:
        validate_topic_name(topic, "--topic")
    except InvalidTopicNameError as exc:
        raise ConfigError(str(exc), "topic") from None
    if partitions < 1:
        raise ConfigError(f"--partitions must be >= 1, got {partitions}", "partitions")
    if input_partitions is not None and input_partitions < 1:
        raise ConfigError(f"--input-partitions must be >= 1, got {input_partitions}", "input-partitions")
    if sink_id is not None and not exactly_once:
        raise ConfigError("--sink-id needs --exactly-once", "sink-id")
    if exactly_once and embedded_broker:
        raise ConfigError(_EMBEDDED_EXACTLY_ONCE, "exactly-once")
    eo_options: dict[str, str] = {}
    if exactly_once:
        eo_options["sparkafka.guarantee"] = "exactly_once"
    if sink_id is not None:
        try:
            eo_options["sparkafka.sink.id"] = check_sink_id(sink_id)
        except ConfigError as exc:
            raise ConfigError(f"--sink-id: {exc}", "sink-id") from exc
    if "bootstrap.servers" in producer_config:
        # the sink would write there while the pipeline creates the topic, follows the progress and counts the
        # records at --bootstrap-servers (or its embedded broker)
        raise ConfigError("-X bootstrap.servers: give the cluster as --bootstrap-servers (the pipeline creates the "
                          "topic, follows progress and counts the records there, as well as writing to it)",
                          "producer-config")
    try:
        ProducerConfig.from_mapping({"bootstrap.servers": bootstrap})  # alone: an error here is its own
    except ConfigError as exc:
        raise ConfigError(f"--bootstrap-servers: {exc}", "bootstrap-servers") from exc
    try:
        SinkOptions.parse({**{f"kafka.{k}": v for k, v in producer_config.items()},
                           "kafka.bootstrap.servers": bootstrap, **eo_options})
    except ConfigError as exc:
        if exc.key == "sparkafka.guarantee":  # -X settings a transactional producer cannot have (acks=1, ...)
            raise ConfigError(f"--exactly-once needs transactional producers, which the -X settings do not allow: "
                              f"{exc.__cause__ or exc}", "exactly-once") from exc
        raise ConfigError(f"-X: {exc}", "producer-config") from exc


def _check_writable(path: str) -> None:
    """A --summary-json the job could not write, refused before it runs (not after a whole Spark job)."""
    directory = os.path.dirname(os.path.abspath(path))
    if os.path.isdir(path) or not os.path.isdir(directory) or not os.access(directory, os.W_OK) or (
            os.path.exists(path) and not os.access(path, os.W_OK)):
        raise ConfigError(f"--summary-json {path!r} cannot be written (its directory must exist and be writable)",
                          "summary-json")


def _short(exc: BaseException, max_lines: int = 25) -> str:
    text = str(exc).strip() or type(exc).__name__
    lines = text.splitlines()
    if len(lines) > max_lines:
        lines = [*lines[:5], "...", *lines[-(max_lines - 6):]]
    return "\n".join(lines)
