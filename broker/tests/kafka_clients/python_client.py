"""kafka-python against a Tidewater cluster's Kafka listeners (broker/tests/kafka_clients.rs).

Usage: python_client.py BOOTSTRAP STEP TOPIC
Steps print one JSON line with what they saw; the Rust test checks it.
  produce-consume  create TOPIC (3 partitions, RF 3), produce 60 values with acks=all,
                   consume them from the start in group "py-read", commit, read the commits
  group            two consumers in group "py-group" on TOPIC: the first takes every
                   partition, the second joins and the partitions are split between them;
                   each commits, and the group's offsets are read back
  not-enough       create TOPIC with min.insync.replicas=4 (RF 3) and produce with acks=all
"""
import json
import sys
import time

from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import NewTopic
from kafka.errors import KafkaError

bootstrap, step, topic = sys.argv[1], sys.argv[2], sys.argv[3]
# The broker serves no InitProducerId (docs/kafka-protocol.md): idempotence must be off.
PRODUCER = dict(bootstrap_servers=bootstrap, acks="all", enable_idempotence=False, retries=0)


def group_offsets(admin, group_id):
    """The group's committed offsets by partition (OffsetFetch), whichever name this
    kafka-python version gives the call."""
    if hasattr(admin, "list_group_offsets"):
        offsets = admin.list_group_offsets(group_id)[group_id]
    else:
        offsets = admin.list_consumer_group_offsets(group_id)
    return {str(tp.partition): meta.offset for tp, meta in offsets.items() if tp.topic == topic}


def create(configs=None):
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    admin.create_topics([NewTopic(topic, num_partitions=3, replication_factor=3,
                                  topic_configs=configs or {})])
    return admin


def produce_consume():
    admin = create()
    producer = KafkaProducer(**PRODUCER)
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
    """Polls until the consumer's assignment has `want` partitions, or the deadline."""
    while time.time() < deadline:
        consumer.poll(timeout_ms=200)
        if len(consumer.assignment()) == want:
            break
    return sorted(tp.partition for tp in consumer.assignment())


def group():
    admin = create()
    settings = dict(bootstrap_servers=bootstrap, group_id="py-group",
                    auto_offset_reset="earliest", enable_auto_commit=False,
                    session_timeout_ms=10000, heartbeat_interval_ms=500)
    first = KafkaConsumer(topic, **settings)
    alone = assignment_of(first, 3, time.time() + 30)
    second = KafkaConsumer(topic, **settings)
    deadline = time.time() + 30
    split = ([], [])
    while time.time() < deadline:
        first.poll(timeout_ms=100)
        second.poll(timeout_ms=100)
        split = (sorted(tp.partition for tp in first.assignment()),
                 sorted(tp.partition for tp in second.assignment()))
        if split[0] and split[1] and len(split[0]) + len(split[1]) == 3:
            break
    first.commit({TopicPartition(topic, p): _meta(7) for p in split[0]})
    second.commit({TopicPartition(topic, p): _meta(9) for p in split[1]})
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


{"produce-consume": produce_consume, "group": group, "not-enough": not_enough}[step]()
