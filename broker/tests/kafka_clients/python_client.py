"""kafka-python against a Tidewater cluster's Kafka listeners (broker/tests/kafka_clients.rs).

Usage: python_client.py BOOTSTRAP STEP TOPIC
Steps print one JSON line with what they saw; the Rust test checks it.
  produce-consume  create TOPIC (3 partitions, RF 3), produce 60 values with acks=all,
                   consume them from the start in group "py-read", commit, read the commits
  produce-consume-idempotent
                   the same with an idempotent producer (enable_idempotence=True, which
                   sends InitProducerId and stamps each batch with its id, epoch, sequence)
  group            two consumers in group "py-group" on TOPIC: the first takes every
                   partition, the second joins and the partitions are split between them;
                   each commits, and the group's offsets are read back
  not-enough       create TOPIC with min.insync.replicas=4 (RF 3) and produce with acks=all
  transactions     a transactional producer (transactional_id "py-txn") commits one
                   transaction and aborts one, then leaves a third open; read_committed and
                   read_uncommitted consumers read TOPIC from the start; a second producer of
                   the same transactional id fences the first (whose open transaction is
                   aborted) and commits a transaction of its own; the consumers read again
  txn-offsets      consume-transform-produce: 30 plain values on TOPIC, polled by a member of
                   group "py-eos"; a transactional producer (transactional_id "py-eos")
                   commits offsets in a transaction (send_offsets_to_transaction with the
                   member's group metadata), aborts a second, leaves a third open and is
                   fenced by a successor that commits a fourth; the group's offsets are read
                   after each (every distinct answer, in order: a commit's offsets show once
                   its markers are written, after commit_transaction has returned), and a
                   new member of the group reads from where they stand
"""
import json
import logging
import sys
import time

from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import NewTopic
from kafka.structs import OffsetAndMetadata
from kafka.errors import CommitFailedError, KafkaError, RebalanceInProgressError

bootstrap, step, topic = sys.argv[1], sys.argv[2], sys.argv[3]
# The group coordinator's joins and assignments on stderr, which the test prints: when a
# member waits for partitions, this says where it stopped.
logging.basicConfig(stream=sys.stderr, level=logging.WARNING,
                    format="%(asctime)s %(name)s %(levelname)s %(message)s")
logging.getLogger("kafka.coordinator").setLevel(logging.INFO)
# A plain producer: no idempotence, no retries, so each send is one attempt.
PRODUCER = dict(bootstrap_servers=bootstrap, acks="all", enable_idempotence=False, retries=0)
# An idempotent producer, with kafka-python's retries (they resend the same sequences).
IDEMPOTENT_PRODUCER = dict(bootstrap_servers=bootstrap, acks="all", enable_idempotence=True)


def group_offsets(admin, group_id):
    """The group's committed offsets by partition (OffsetFetch), whichever name this
    kafka-python version gives the call."""
    if hasattr(admin, "list_group_offsets"):
        offsets = admin.list_group_offsets(group_id)[group_id]
    else:
        offsets = admin.list_consumer_group_offsets(group_id)
    return {str(tp.partition): meta.offset for tp, meta in offsets.items() if tp.topic == topic}


def create(configs=None):
    """Creates TOPIC, then waits until Metadata names a leader for each of its 3 partitions
    in several answers running: CreateTopics answers once the controller has the topic, before
    every broker has it, and a consumer whose group forms in between is assigned nothing
    ("No partition metadata for topic" from the range assignor)."""
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    admin.create_topics([NewTopic(topic, num_partitions=3, replication_factor=3,
                                  topic_configs=configs or {})])
    deadline, running = time.time() + 30, 0
    while running < 5 and time.time() < deadline:
        running = running + 1 if fully_led(admin) else 0
        time.sleep(0.1)
    return admin


def fully_led(admin):
    """Whether one Metadata answer gives TOPIC 3 partitions, each with a leader."""
    try:
        described = admin.describe_topics([topic])
    except KafkaError:
        return False
    partitions = [p for t in described if t["name"] == topic and t["error_code"] == 0
                  for p in t["partitions"]]
    return len(partitions) == 3 and all(p["leader_id"] >= 0 for p in partitions)


def produce_consume(settings=PRODUCER):
    admin = create()
    producer = KafkaProducer(**settings)
    futures = [producer.send(topic, value=f"v{i}".encode()) for i in range(60)]
    producer.flush()
    acked = [(f.get().partition, f.get().offset) for f in futures]
    producer.close()
    consumer = KafkaConsumer(topic, bootstrap_servers=bootstrap, group_id="py-read",
                             auto_offset_reset="earliest", enable_auto_commit=False,
                             consumer_timeout_ms=8000)
    read = [(m.partition, m.offset, m.value.decode()) for m in consumer]
    consumer.commit()
    consumer.close()
    committed = group_offsets(admin, "py-read")
    print(json.dumps({
        "topics": sorted(admin.list_topics()),
        "acked": acked,
        "read": read,
        "committed": committed,
    }))


def assignment_of(consumer, want, deadline):
    """Polls until the consumer's assignment has `want` partitions, or the deadline.

    kafka-python 3.0 can join before its first Metadata answer and, as the group's leader,
    assign itself nothing ("No partition metadata for topic"); it rejoins when the metadata
    arrives, except when the answer lands while the assignment is being made, and then it
    keeps its empty assignment for good. A member that has had the topic's partitions in its
    metadata for 5 s and still owns nothing leaves and joins again, once."""
    empty_since, rejoined = None, False
    while time.time() < deadline:
        consumer.poll(timeout_ms=200)
        if len(consumer.assignment()) == want:
            break
        stuck = not consumer.assignment() and len(consumer.partitions_for_topic(topic) or ()) == 3
        empty_since = (empty_since or time.time()) if stuck else None
        if empty_since and time.time() - empty_since > 5 and not rejoined:
            print("empty assignment with the topic's metadata for 5 s: rejoining",
                  file=sys.stderr)
            consumer.unsubscribe()
            consumer.subscribe([topic])
            rejoined = True
    return sorted(tp.partition for tp in consumer.assignment())


def polled_split(first, second):
    """Both members poll once; their assignments."""
    first.poll(timeout_ms=100)
    second.poll(timeout_ms=100)
    return (sorted(tp.partition for tp in first.assignment()),
            sorted(tp.partition for tp in second.assignment()))


def group():
    admin = create()
    settings = dict(bootstrap_servers=bootstrap, group_id="py-group",
                    auto_offset_reset="earliest", enable_auto_commit=False,
                    session_timeout_ms=10000, heartbeat_interval_ms=500)
    first = KafkaConsumer(topic, **settings)
    alone = assignment_of(first, 3, time.time() + 30)
    second = KafkaConsumer(topic, **settings)
    split, committed_split = ([], []), False
    # kafka-python 3.0.12 against Kafka 4.1.1 once fell into a rebalance storm here (one
    # member rejoining right after every assignment for over 30 s; once in eight runs): after
    # 20 s without a committed split both members leave and a fresh pair joins, once.
    for attempt in range(2):
        deadline = time.time() + 20
        while time.time() < deadline:
            split = polled_split(first, second)
            whole = sorted(split[0] + split[1]) == [0, 1, 2]
            if split[0] and split[1] and whole:
                # A member can still be in a rebalance round the other has finished (Kafka
                # answers its commit REBALANCE_IN_PROGRESS): both poll on, and commit again.
                try:
                    first.commit({TopicPartition(topic, p): _meta(7) for p in split[0]})
                    second.commit({TopicPartition(topic, p): _meta(9) for p in split[1]})
                    committed_split = True
                    break
                except (RebalanceInProgressError, CommitFailedError) as e:
                    print(f"commit during a rebalance ({type(e).__name__}): polling on",
                          file=sys.stderr)
        if committed_split or attempt == 1:
            break
        print(f"no committed split in 20 s (last {split}): a fresh pair of members joins",
              file=sys.stderr)
        first.close()
        second.close()
        first = KafkaConsumer(topic, **settings)
        assignment_of(first, 3, time.time() + 30)
        second = KafkaConsumer(topic, **settings)
    committed = group_offsets(admin, "py-group")
    first.close()
    second.close()
    print(json.dumps({
        "alone": alone,
        "split": split,
        "committed": committed,
    }))


def _meta(offset):
    from kafka.structs import OffsetAndMetadata
    try:
        return OffsetAndMetadata(offset, "", -1)
    except TypeError:
        return OffsetAndMetadata(offset, "")


def not_enough():
    create({"min.insync.replicas": "4"})
    producer = KafkaProducer(**PRODUCER)
    try:
        metadata = producer.send(topic, value=b"x").get(timeout=30)
        outcome = {"acked": [metadata.partition, metadata.offset]}
    except KafkaError as e:
        outcome = {"error": type(e).__name__}
    producer.close()
    print(json.dumps(outcome))


def read_all(isolation_level, timeout_ms=6000):
    """Every value of TOPIC from the start, at `isolation_level`, without a group."""
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, isolation_level=isolation_level,
                             auto_offset_reset="earliest", enable_auto_commit=False,
                             consumer_timeout_ms=timeout_ms)
    partitions = [TopicPartition(topic, p) for p in range(3)]
    consumer.assign(partitions)
    consumer.seek_to_beginning(*partitions)
    values = [m.value.decode() for m in consumer]
    consumer.close()
    return values


def transactional(name):
    producer = KafkaProducer(bootstrap_servers=bootstrap, transactional_id="py-txn",
                             client_id=name)
    producer.init_transactions()
    return producer


def sent(producer, prefix, count):
    """Sends `count` values in the open transaction; answers the values acknowledged."""
    futures = [(f"{prefix}{i}", producer.send(topic, value=f"{prefix}{i}".encode(),
                                              partition=i % 3)) for i in range(count)]
    producer.flush()
    return [value for value, f in futures if f.succeeded()]


def transactions():
    create()
    first = transactional("first")
    first.begin_transaction()
    committed = sent(first, "c", 12)
    first.commit_transaction()
    first.begin_transaction()
    aborted = sent(first, "a", 9)
    first.abort_transaction()
    first.begin_transaction()
    left_open = sent(first, "o", 6)
    open_committed = read_all("read_committed")
    open_uncommitted = read_all("read_uncommitted")
    second = transactional("second")
    fenced = None
    try:
        first.commit_transaction()
    except KafkaError as e:
        fenced = type(e).__name__
    second.begin_transaction()
    after = sent(second, "d", 6)
    second.commit_transaction()
    second.close()
    print(json.dumps({
        "committed": committed,
        "aborted": aborted,
        "left_open": left_open,
        "open_read_committed": open_committed,
        "open_read_uncommitted": open_uncommitted,
        "fenced": fenced,
        "after": after,
        "read_committed": read_all("read_committed"),
        "read_uncommitted": read_all("read_uncommitted"),
    }))


def txn_offsets():
    create()
    plain = KafkaProducer(**PRODUCER)
    for i in range(30):
        plain.send(topic, value=f"in{i}".encode(), partition=i % 3)
    plain.flush()
    plain.close()
    member = KafkaConsumer(topic, bootstrap_servers=bootstrap, group_id="py-eos",
                           isolation_level="read_committed", auto_offset_reset="earliest",
                           enable_auto_commit=False)
    polled, deadline = 0, time.time() + 30
    while polled < 30 and time.time() < deadline:
        polled += sum(len(batch) for batch in member.poll(timeout_ms=500).values())
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)

    def answers(until=None, seconds=2.0):
        """The group's offsets every 100 ms, each distinct answer once in order: until the
        answer is `until` (at most 30 s), or for `seconds` when `until` is None."""
        seen, deadline = [], time.time() + (30 if until else seconds)
        while time.time() < deadline:
            now = group_offsets(admin, "py-eos")
            if not seen or seen[-1] != now:
                seen.append(now)
            if until is not None and now == until:
                break
            time.sleep(0.1)
        return seen

    def offsets(per_partition):
        return {TopicPartition(topic, p): OffsetAndMetadata(o, "", -1)
                for p, o in per_partition.items()}

    def transaction(producer, output, per_partition):
        producer.begin_transaction()
        if output:
            producer.send(topic, value=output.encode(), partition=0)
        producer.send_offsets_to_transaction(offsets(per_partition), member.group_metadata())

    first = KafkaProducer(bootstrap_servers=bootstrap, transactional_id="py-eos",
                          client_id="eos-first")
    first.init_transactions()
    outcome = {"polled": polled}
    transaction(first, "out-committed", {0: 3, 1: 5, 2: 7})
    first.commit_transaction()
    outcome["after_commit"] = answers(until={"0": 3, "1": 5, "2": 7})
    transaction(first, "out-aborted", {0: 9, 1: 9, 2: 9})
    first.abort_transaction()
    outcome["after_abort"] = answers()
    transaction(first, None, {1: 8})
    outcome["while_open"] = answers()
    second = KafkaProducer(bootstrap_servers=bootstrap, transactional_id="py-eos",
                           client_id="eos-second")
    second.init_transactions()
    try:
        first.commit_transaction()
        outcome["fenced"] = None
    except KafkaError as e:
        outcome["fenced"] = type(e).__name__
    outcome["after_fencing"] = answers()
    transaction(second, None, {0: 10})
    second.commit_transaction()
    second.close()
    outcome["after_successor"] = answers(until={"0": 10, "1": 5, "2": 7})
    member.close()
    # A new member resumes where the group's offsets stand.
    resumed = KafkaConsumer(topic, bootstrap_servers=bootstrap, group_id="py-eos",
                            isolation_level="read_committed", auto_offset_reset="earliest",
                            enable_auto_commit=False, consumer_timeout_ms=8000)
    outcome["resumed"] = {}
    for m in resumed:
        outcome["resumed"].setdefault(str(m.partition), []).append([m.offset, m.value.decode()])
    resumed.close()
    print(json.dumps(outcome))


{
    "produce-consume": produce_consume,
    "txn-offsets": txn_offsets,
    "transactions": transactions,
    "produce-consume-idempotent": lambda: produce_consume(IDEMPOTENT_PRODUCER),
    "group": group,
    "not-enough": not_enough,
}[step]()
