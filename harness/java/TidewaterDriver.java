// Tidewater's driver around Apache Kafka's own Java client (kafka-clients), the client Kafka's
// users run. The harness compiles this file against the kafka-clients jar of the Kafka version
// under test and starts one driver per run; the Rust side (tidewater_workloads::java) speaks
// JSON lines with it:
//
//   argv[0]   {"bootstrap": "H:P,H:P", "producer": {kafka producer configs},
//              "consumer": {kafka consumer configs}, "transactional_id_prefix": "tidewater-"}
//   stdin     one request per line: {"id": 7, "client": "w3", "op": "send" | "poll" | "txn" | "close", ...}
//   stdout    one answer per request, in any order: {"id": 7, "type": "ok" | "fail" | "info", ...}
//
// Each logical client (the "client" field) is one thread with its own producer and consumer,
// made on first use, so the requests of one client run in order and different clients at once.
// Nothing is retried here unless a request asks for it: the producer retries inside the client
// as its configs say, and the answer carries what the client reported (offsets, or the
// exception's class name and message). The one retry a request may ask for is of a
// transaction's end ("end_attempts_max" > 1: commitTransaction or abortTransaction called again
// after a TimeoutException, as Kafka's client allows), and then the answer says how many calls
// were made and what each failed call threw ("txn_end"). An error is never swallowed: every
// request gets exactly one answer.

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Iterator;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetOutOfRangeException;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.clients.producer.internals.FutureRecordMetadata;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.AuthorizationException;
import org.apache.kafka.common.errors.InterruptException;
import org.apache.kafka.common.errors.InvalidTopicException;
import org.apache.kafka.common.errors.InvalidTxnStateException;
import org.apache.kafka.common.errors.ProducerFencedException;
import org.apache.kafka.common.errors.RecordTooLargeException;
import org.apache.kafka.common.errors.SerializationException;
import org.apache.kafka.common.errors.TimeoutException;
import org.apache.kafka.common.errors.UnsupportedVersionException;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

public final class TidewaterDriver {
    private static final ObjectMapper JSON = new ObjectMapper();
    /** The protocol's channel: the real standard output. System.out is pointed at stderr so
     *  that nothing else (a library's println) can corrupt it. */
    private static PrintStream answers;
    /** Bound on closing a client's producer or consumer. */
    private static final Duration CLOSE_TIMEOUT = Duration.ofSeconds(2);

    private final String bootstrap;
    private final Map<String, String> producerConfigs;
    private final Map<String, String> consumerConfigs;
    private final String transactionalIdPrefix;
    private final Map<String, Client> clients = new ConcurrentHashMap<>();

    /** One logical client: a thread, and the producer and consumer it made. */
    private final class Client {
        final String name;
        final ExecutorService thread = Executors.newSingleThreadExecutor();
        KafkaProducer<String, String> producer;
        KafkaProducer<String, String> txnProducer;
        KafkaConsumer<String, String> consumer;

        Client(String name) {
            this.name = name;
        }

        KafkaProducer<String, String> producer() {
            if (producer == null) {
                // The plain producer of the queue workload: never transactional, even when
                // the recorded configs name the transactional producers' ids.
                Properties p = properties(producerConfigs, name);
                p.remove("transactional.id");
                producer = new KafkaProducer<>(p, new StringSerializer(), new StringSerializer());
            }
            return producer;
        }

        /** The transactional producer, `transactional.id` = prefix + client name, initialised
         *  (initTransactions fences an earlier producer of the same id and finishes its
         *  transaction, as KIP-98 says). A failed initialisation leaves none. */
        KafkaProducer<String, String> txnProducer() {
            if (txnProducer == null) {
                txnProducer = initialisedTxnProducer();
            }
            return txnProducer;
        }

        /** A new transactional producer of this client's transactional.id, initialised: it
         *  fences any other producer of the id. */
        KafkaProducer<String, String> initialisedTxnProducer() {
            Properties p = properties(producerConfigs, name);
            p.put("transactional.id", transactionalIdPrefix + name);
            p.put("enable.idempotence", "true");
            KafkaProducer<String, String> made = new KafkaProducer<>(p, new StringSerializer(), new StringSerializer());
            try {
                made.initTransactions();
            } catch (RuntimeException e) {
                made.close(Duration.ZERO);
                throw e;
            }
            return made;
        }

        KafkaConsumer<String, String> consumer() {
            if (consumer == null) {
                Properties p = properties(consumerConfigs, name);
                p.put("enable.auto.commit", "false");
                consumer = new KafkaConsumer<>(p, new StringDeserializer(), new StringDeserializer());
            }
            return consumer;
        }

        /** Drops the transactional producer after an error it cannot continue from. */
        void dropTxnProducer() {
            if (txnProducer != null) {
                try {
                    txnProducer.close(Duration.ZERO);
                } catch (RuntimeException ignored) {
                    // Closing a broken producer may throw; it is gone either way.
                }
                txnProducer = null;
            }
        }

        void closeAll() {
            dropTxnProducer();
            if (producer != null) {
                try {
                    producer.close(CLOSE_TIMEOUT);
                } catch (RuntimeException ignored) {
                    // The client is being discarded.
                }
                producer = null;
            }
            if (consumer != null) {
                try {
                    consumer.close(CLOSE_TIMEOUT);
                } catch (RuntimeException ignored) {
                    // The client is being discarded.
                }
                consumer = null;
            }
        }
    }

    private TidewaterDriver(JsonNode settings) {
        bootstrap = settings.path("bootstrap").asText();
        producerConfigs = strings(settings.path("producer"));
        consumerConfigs = strings(settings.path("consumer"));
        transactionalIdPrefix = settings.path("transactional_id_prefix").asText("tidewater-");
    }

    private static Map<String, String> strings(JsonNode node) {
        Map<String, String> out = new java.util.TreeMap<>();
        Iterator<Map.Entry<String, JsonNode>> fields = node.fields();
        while (fields.hasNext()) {
            Map.Entry<String, JsonNode> e = fields.next();
            out.put(e.getKey(), e.getValue().asText());
        }
        return out;
    }

    private Properties properties(Map<String, String> configs, String client) {
        Properties p = new Properties();
        p.putAll(configs);
        p.put("bootstrap.servers", bootstrap);
        p.put("client.id", "tidewater-" + client);
        return p;
    }

    public static void main(String[] args) throws Exception {
        answers = new PrintStream(new java.io.FileOutputStream(java.io.FileDescriptor.out), true, StandardCharsets.UTF_8);
        System.setOut(System.err);
        if (args.length != 1) {
            System.err.println("usage: TidewaterDriver SETTINGS_JSON");
            System.exit(2);
        }
        TidewaterDriver driver = new TidewaterDriver(JSON.readTree(args[0]));
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        answer(JSON.createObjectNode().put("id", 0).put("type", "ok").put("ready", true));
        String line;
        while ((line = in.readLine()) != null) {
            if (line.isBlank()) {
                continue;
            }
            JsonNode request;
            try {
                request = JSON.readTree(line);
            } catch (Exception e) {
                ObjectNode bad = JSON.createObjectNode().put("id", -1).put("type", "fail");
                answer(bad.put("error", "BadRequest").put("message", String.valueOf(e.getMessage())));
                continue;
            }
            driver.dispatch(request);
        }
        // Standard input closed: the harness is done (or gone). Close every client and exit.
        for (Client c : driver.clients.values()) {
            c.thread.submit(c::closeAll);
            c.thread.shutdown();
        }
        for (Client c : driver.clients.values()) {
            c.thread.awaitTermination(10, TimeUnit.SECONDS);
        }
        System.exit(0);
    }

    private static synchronized void answer(ObjectNode answer) {
        answers.println(answer.toString());
    }

    private void dispatch(JsonNode request) {
        long id = request.path("id").asLong(-1);
        String name = request.path("client").asText("");
        String op = request.path("op").asText("");
        if (name.isEmpty()) {
            answer(failure(id, "fail", "BadRequest", "no client"));
            return;
        }
        Client client = clients.computeIfAbsent(name, Client::new);
        client.thread.submit(() -> {
            ObjectNode out;
            try {
                switch (op) {
                    case "send":
                        out = send(client, request);
                        break;
                    case "poll":
                        out = poll(client, request);
                        break;
                    case "txn":
                        out = txn(client, request);
                        break;
                    case "init":
                        // The transactional producer made and initialised (InitProducerId):
                        // the first one creates __transaction_state, which takes a while.
                        try {
                            client.txnProducer();
                            out = JSON.createObjectNode().put("type", "ok");
                        } catch (RuntimeException e) {
                            out = failure(id, "fail", name(e), String.valueOf(e.getMessage()));
                        }
                        break;
                    case "close":
                        client.closeAll();
                        out = JSON.createObjectNode().put("type", "ok");
                        break;
                    default:
                        out = failure(id, "fail", "BadRequest", "unknown op " + op);
                }
            } catch (Throwable e) {
                // Anything not mapped below: the client's state is unknown, say so.
                out = failure(id, "info", name(e), String.valueOf(e.getMessage()));
            }
            out.put("id", id);
            noteFailedTxn(name, op, out);
            answer(out);
        });
    }

    /** Writes a transaction that did not commit, except a deliberate abort, to stderr (the
     *  run's java-driver.log) with the exception's message: the history keeps only the
     *  exception's name. */
    private static void noteFailedTxn(String client, String op, ObjectNode out) {
        String error = out.path("error").asText("");
        if (op.equals("txn") && !out.path("type").asText().equals("ok") && !error.equals("aborted")) {
            System.err.println("tidewater-driver: " + client + " txn " + out.path("type").asText() + " " + error + ": "
                    + out.path("message").asText(""));
        }
    }

    private static ObjectNode failure(long id, String type, String error, String message) {
        return JSON.createObjectNode().put("id", id).put("type", type).put("error", error).put("message", message);
    }

    /** The exception a future or a client call reported, without the ExecutionException
     *  wrapper. */
    private static Throwable unwrap(Throwable e) {
        return e instanceof ExecutionException && e.getCause() != null ? e.getCause() : e;
    }

    private static String name(Throwable e) {
        return unwrap(e).getClass().getSimpleName();
    }

    /** True when a failed send certainly appended nothing: the client refused the record
     *  before any produce request could carry it (too large, bad topic, not serialisable,
     *  not authorised, not supported). Any other error may come after an attempt that
     *  reached the leader, since the producer retries inside the client. */
    private static boolean certainlyNotSent(Throwable e) {
        Throwable t = unwrap(e);
        return t instanceof RecordTooLargeException
                || t instanceof InvalidTopicException
                || t instanceof SerializationException
                || t instanceof AuthorizationException
                || t instanceof UnsupportedVersionException;
    }

    private static ProducerRecord<String, String> record(JsonNode key, JsonNode value) {
        String k = key.asText();
        int slash = k.lastIndexOf('/');
        if (slash <= 0) {
            throw new IllegalArgumentException("bad key " + k);
        }
        return new ProducerRecord<>(k.substring(0, slash), Integer.parseInt(k.substring(slash + 1)), null, value.asText());
    }

    private static TopicPartition partition(String key) {
        int slash = key.lastIndexOf('/');
        return new TopicPartition(key.substring(0, slash), Integer.parseInt(key.substring(slash + 1)));
    }

    /** {"op":"send","key":"t0/1","value":907} -> {"type":"ok","offset":17}. */
    private ObjectNode send(Client client, JsonNode request) {
        Future<RecordMetadata> future;
        try {
            future = client.producer().send(record(request.path("key"), request.path("value")));
        } catch (RuntimeException e) {
            // Refused by the client itself (send throws before anything is queued).
            return failure(0, "fail", name(e), String.valueOf(e.getMessage()));
        }
        // The producer answers an error it met before appending the record to a batch (no
        // metadata for the partition within max.block.ms, a record too large, ...) with a
        // future of its own that is not a batch's FutureRecordMetadata: nothing was sent.
        boolean appended = future instanceof FutureRecordMetadata;
        try {
            RecordMetadata m = future.get();
            return JSON.createObjectNode().put("type", "ok").put("offset", m.offset());
        } catch (InterruptedException | ExecutionException e) {
            boolean certain = !appended || certainlyNotSent(e);
            return failure(0, certain ? "fail" : "info", name(e), String.valueOf(unwrap(e).getMessage()));
        }
    }

    /** Assigns the consumer to the keys of `positions`, seeks each to its position, polls
     *  once for at most `wait_ms`; adds the records per key to `records` and returns the
     *  next positions and the end offsets the fetches reported (the high watermark, or the
     *  last stable offset under read_committed). */
    private static void pollOnce(KafkaConsumer<String, String> consumer, ObjectNode positions, long waitMs, ObjectNode records, ObjectNode ends) {
        List<TopicPartition> tps = new ArrayList<>();
        positions.fieldNames().forEachRemaining(k -> tps.add(partition(k)));
        if (!consumer.assignment().equals(new java.util.HashSet<>(tps))) {
            consumer.assign(tps);
        }
        for (TopicPartition tp : tps) {
            consumer.seek(tp, positions.path(tp.topic() + "/" + tp.partition()).asLong());
        }
        ConsumerRecords<String, String> polled = consumer.poll(Duration.ofMillis(waitMs));
        for (TopicPartition tp : tps) {
            String key = tp.topic() + "/" + tp.partition();
            ArrayNode list = records.has(key) ? (ArrayNode) records.get(key) : records.putArray(key);
            for (ConsumerRecord<String, String> r : polled.records(tp)) {
                ArrayNode pair = list.addArray();
                pair.add(r.offset());
                try {
                    pair.add(Long.parseLong(r.value()));
                } catch (NumberFormatException e) {
                    pair.add(r.value());
                }
            }
            long next = consumer.position(tp, Duration.ofMillis(waitMs + 1000));
            positions.put(key, next);
            java.util.OptionalLong lag = consumer.currentLag(tp);
            if (lag.isPresent()) {
                ends.put(key, next + lag.getAsLong());
            }
        }
    }

    /** {"op":"poll","positions":{"t0/1":16},"wait_ms":100} -> {"type":"ok","records":{"t0/1":[[16,903]]},
     *  "positions":{"t0/1":17},"ends":{"t0/1":18}}. A poll has no effect, so every error is a fail. */
    private ObjectNode poll(Client client, JsonNode request) {
        ObjectNode positions = ((ObjectNode) request.path("positions")).deepCopy();
        ObjectNode out = JSON.createObjectNode().put("type", "ok");
        ObjectNode records = out.putObject("records");
        ObjectNode ends = JSON.createObjectNode();
        try {
            pollOnce(client.consumer(), positions, request.path("wait_ms").asLong(100), records, ends);
        } catch (OffsetOutOfRangeException e) {
            // auto.offset.reset=none: the position is outside the log the broker answered
            // for. Kafka's error name, so the workload resets the position itself, in the
            // history's sight.
            return failure(0, "fail", "OFFSET_OUT_OF_RANGE", String.valueOf(e.getMessage()));
        } catch (RuntimeException e) {
            return failure(0, "fail", name(e), String.valueOf(e.getMessage()));
        }
        out.set("positions", positions);
        out.set("ends", ends);
        return out;
    }

    /** {"op":"txn","micro":[["send","t0/0",41],["poll"]],"positions":{...},"wait_ms":100,"end":"commit"}:
     *  one transaction, ended by "end": "commit", "abort", or "zombie" (after the first
     *  micro-op a successor producer of the same transactional.id is initialised, and this
     *  one goes on with the rest and asks to commit). Answers ok (committed) with the
     *  micro-ops completed, fail (aborted, or never committed: this producer sent no
     *  EndTxn(COMMIT), its successor's initialisation aborted it, or the coordinator
     *  refused the commit) with the error, or info (the commit was sent and its outcome is
     *  unknown). With "end_attempts_max" > 1 the
     *  commit or abort is called again after a TimeoutException, on the same producer, up to
     *  that many calls in all ({@link #endWithRetries}); the answer's "txn_end" says how many
     *  calls were made and what the failed ones threw. */
    private ObjectNode txn(Client client, JsonNode request) {
        KafkaProducer<String, String> producer;
        try {
            producer = client.txnProducer();
            producer.beginTransaction();
        } catch (RuntimeException e) {
            client.dropTxnProducer();
            return failure(0, "fail", name(e), String.valueOf(e.getMessage()));
        }
        ObjectNode positions = ((ObjectNode) request.path("positions")).deepCopy();
        long waitMs = request.path("wait_ms").asLong(100);
        ArrayNode micro = (ArrayNode) request.path("micro");
        String end = request.path("end").asText("commit");
        int endAttemptsMax = Math.max(1, request.path("end_attempts_max").asInt(1));
        ArrayNode done = JSON.createArrayNode();
        List<Future<RecordMetadata>> sends = new ArrayList<>();
        List<ArrayNode> sendSlots = new ArrayList<>();
        Throwable error = null;
        // Set once a successor fenced this producer: from then on `producer` is a zombie.
        boolean fenced = false;
        try {
            for (int j = 0; j < micro.size(); j++) {
                JsonNode m = micro.get(j);
                if (j == 1 && end.equals("zombie")) {
                    fenced = fenceBySuccessor(client, producer);
                }
                String f = m.path(0).asText();
                if (f.equals("send")) {
                    ArrayNode slot = done.addArray().add("send").add(m.path(1).asText());
                    sendSlots.add(slot);
                    sends.add(producer.send(record(m.path(1), m.path(2))));
                } else if (f.equals("poll")) {
                    ObjectNode records = JSON.createObjectNode();
                    pollOnce(client.consumer(), positions, waitMs, records, JSON.createObjectNode());
                    done.addArray().add("poll").add(records);
                } else {
                    throw new IllegalArgumentException("unknown micro-op " + f);
                }
            }
            producer.flush();
            for (int i = 0; i < sends.size(); i++) {
                RecordMetadata md = sends.get(i).get();
                ArrayNode pair = sendSlots.get(i).addArray();
                pair.add(md.offset());
                pair.add(Long.parseLong(micro.get(indexOfSend(micro, i)).path(2).asText()));
            }
        } catch (InterruptedException | ExecutionException | RuntimeException e) {
            error = e;
        }
        if (fenced) {
            return zombieEnd(producer, error, done, positions);
        }
        if (error != null || end.equals("abort")) {
            return abort(client, producer, error, endAttemptsMax);
        }
        if (endAttemptsMax > 1) {
            return commitWithRetries(client, producer, endAttemptsMax, done, positions);
        }
        try {
            producer.commitTransaction();
        } catch (RuntimeException e) {
            // The EndTxn(COMMIT) may have reached the coordinator: unknown, unless the
            // coordinator refused it (commitRefused). A new producer of the same
            // transactional.id will fence this one and finish the transaction.
            client.dropTxnProducer();
            return failure(0, commitRefused(e) ? "fail" : "info", name(e), String.valueOf(e.getMessage()));
        }
        return committed(done, positions);
    }

    /** True when a commitTransaction that threw `e` certainly committed nothing: the
     *  coordinator answered EndTxn(COMMIT) with INVALID_TXN_STATE (the client's
     *  InvalidTxnStateException, fatal), so the transaction was not Ongoing there. A refusal
     *  stores nothing, and no earlier EndTxn of this transaction can have committed it: a
     *  coordinator that completed the commit answers a retry with success (CompleteCommit),
     *  one still writing its markers with CONCURRENT_TRANSACTIONS (the client retries), and
     *  one whose epoch a successor bumped with PRODUCER_FENCED before it looks at the state
     *  (TransactionCoordinator.endTransaction). Everything else a commit throws leaves the
     *  outcome unknown. */
    private static boolean commitRefused(RuntimeException e) {
        return unwrap(e) instanceof InvalidTxnStateException;
    }

    private static ObjectNode committed(ArrayNode done, ObjectNode positions) {
        ObjectNode out = JSON.createObjectNode().put("type", "ok");
        out.set("micro", done);
        out.set("positions", positions);
        return out;
    }

    /** What the calls of {@link #endWithRetries} did: how many were made, what each failed one
     *  threw (class names, in order), and the last exception when none returned normally. */
    private static final class EndCalls {
        final String call;
        int attempts;
        final List<String> errors = new ArrayList<>();
        RuntimeException last;

        EndCalls(String call) {
            this.call = call;
        }

        boolean returned() {
            return last == null && attempts > 0;
        }

        /** The answer's "txn_end" field. */
        ObjectNode toJson() {
            ObjectNode out = JSON.createObjectNode().put("call", call).put("attempts", attempts);
            ArrayNode list = out.putArray("errors");
            errors.forEach(list::add);
            return out;
        }
    }

    /** Calls `end` (commitTransaction or abortTransaction) until it returns, at most
     *  `attemptsMax` times. Only a TimeoutException (or an interruption) is retried: Kafka's
     *  client documents both as safe to retry, the same call awaiting the same pending EndTxn
     *  (TransactionManager keeps the result of a call that timed out and hands it to the
     *  retry); any other exception ends the calls. */
    private static EndCalls endWithRetries(String call, Runnable end, int attemptsMax) {
        EndCalls calls = new EndCalls(call);
        while (calls.attempts < attemptsMax) {
            calls.attempts++;
            try {
                end.run();
                calls.last = null;
                return calls;
            } catch (RuntimeException e) {
                calls.last = e;
                calls.errors.add(name(e));
                if (!(e instanceof TimeoutException || e instanceof InterruptException)) {
                    return calls;
                }
            }
        }
        return calls;
    }

    /** The commit of `--txn-retry-commit`: commitTransaction called again after a timeout, on
     *  the same producer, which goes on into the client's next transaction when a call
     *  returned (ok). When none did, the outcome is unknown (info), or fail when the last call
     *  was refused ({@link #commitRefused}), and the producer is dropped, as after any unknown
     *  commit: it cannot begin another transaction before its commit completes. */
    private static ObjectNode commitWithRetries(Client client, KafkaProducer<String, String> producer, int attemptsMax,
            ArrayNode done, ObjectNode positions) {
        EndCalls calls = endWithRetries("commitTransaction", producer::commitTransaction, attemptsMax);
        ObjectNode out;
        if (calls.returned()) {
            out = committed(done, positions);
        } else {
            client.dropTxnProducer();
            String type = commitRefused(calls.last) ? "fail" : "info";
            out = failure(0, type, name(calls.last), String.valueOf(calls.last.getMessage()));
        }
        out.set("txn_end", calls.toJson());
        return out;
    }

    /** Initialises a successor of `producer` (the same transactional.id), which becomes the
     *  client's transactional producer, after the first micro-op's send reached its
     *  partition. True when the successor's initTransactions returned: KIP-98's coordinator
     *  has then bumped the epoch and aborted `producer`'s transaction. False when it failed
     *  (the successor is closed and `producer` goes on as the client's producer). */
    private static boolean fenceBySuccessor(Client client, KafkaProducer<String, String> producer) {
        producer.flush();
        try {
            client.txnProducer = client.initialisedTxnProducer();
            return true;
        } catch (RuntimeException e) {
            System.err.println("tidewater driver: " + client.name + ": successor not initialised: " + name(e) + ": " + e.getMessage());
            return false;
        }
    }

    /** The end of a zombie's transaction: what its commit answers, after the rest of its
     *  micro-ops (`error` if one failed). Its successor's initialisation aborted the
     *  transaction, so a refused commit is a certain fail; a commit the brokers accept is
     *  answered ok, as the client was told. The zombie is closed either way. */
    private static ObjectNode zombieEnd(KafkaProducer<String, String> zombie, Throwable error, ArrayNode done, ObjectNode positions) {
        ObjectNode out;
        if (error != null) {
            out = failure(0, "fail", "FencedBySuccessor", "after the fence: " + name(error) + ": " + unwrap(error).getMessage());
        } else {
            try {
                zombie.commitTransaction();
                out = JSON.createObjectNode().put("type", "ok");
                out.set("micro", done);
                out.set("positions", positions);
            } catch (RuntimeException e) {
                out = failure(0, "fail", "FencedBySuccessor", "commitTransaction: " + name(e) + ": " + e.getMessage());
            }
        }
        try {
            zombie.close(Duration.ZERO);
        } catch (RuntimeException ignored) {
            // A fenced producer may throw on close; it is gone either way.
        }
        return out;
    }

    /** The position in `micro` of its `n`th send. */
    private static int indexOfSend(ArrayNode micro, int n) {
        int seen = 0;
        for (int i = 0; i < micro.size(); i++) {
            if (micro.get(i).path(0).asText().equals("send")) {
                if (seen == n) {
                    return i;
                }
                seen++;
            }
        }
        throw new IllegalStateException("no send " + n);
    }

    /** Aborts the open transaction, deliberately (`error` null) or after `error`. Either way
     *  the answer is fail: this producer never asked to commit. A fenced producer
     *  (ProducerFencedException, fatal per KIP-691) must not abort: it is closed, and the
     *  producer that fenced it aborted the transaction. An abort that throws (with
     *  `attemptsMax` > 1: whose every call timed out, or that threw anything else) leaves a
     *  producer that cannot go on: it is closed too. */
    private ObjectNode abort(Client client, KafkaProducer<String, String> producer, Throwable error, int attemptsMax) {
        String name = error == null ? "aborted" : name(error);
        String message = error == null ? "aborted by the workload" : String.valueOf(unwrap(error).getMessage());
        if (unwrap(error == null ? new RuntimeException() : error) instanceof ProducerFencedException) {
            client.dropTxnProducer();
            return failure(0, "fail", name, message);
        }
        EndCalls calls = endWithRetries("abortTransaction", producer::abortTransaction, attemptsMax);
        if (!calls.returned()) {
            client.dropTxnProducer();
            message = message + "; abortTransaction: " + name(calls.last) + ": " + calls.last.getMessage();
        }
        ObjectNode out = failure(0, "fail", name, message);
        if (attemptsMax > 1) {
            out.set("txn_end", calls.toJson());
        }
        return out;
    }
}
