// Workload for the ackreplay Kafka lab: real Apache Kafka Java clients (same version as the brokers).
//
// * one producer per acks setting (acks=all with idempotence, acks=1 without), each rate-limited,
//   keyed records (hash partitioning, so one produce request usually carries several partitions; --keys 0:
//   keyless records, placed by the client's built-in partitioner),
//   value sizes uniform in [size/2, 3*size/2], incompressible payload, --compression (default none);
// * one consumer in a group, reading the topic (real consumer FETCH traffic in the request logs);
// * per acknowledged *batch* a CSV row with the batch's base offset, taken from the client's own
//   produce result (FutureRecordMetadata.batchIndex, read by reflection): offset - batchIndex = the
//   batch's baseOffset, which is what the broker logs as "baseOffset" in the PRODUCE response.
//
// * --warmup-s W: the same producers run W seconds first, unrecorded (a warm client and warm brokers),
//   then the line "recording_from_us <UTC epoch µs>" on stdout marks the start of the recorded window.
//
// Output (in --out dir): batches-<name>.csv, summary.json.  Compiled by lab/jars.py with javac.

import java.io.*;
import java.lang.reflect.Field;
import java.nio.charset.StandardCharsets;
import java.nio.file.*;
import java.time.Duration;
import java.time.Instant;
import java.util.*;
import java.util.concurrent.*;
import java.util.concurrent.atomic.*;

import org.apache.kafka.clients.consumer.*;
import org.apache.kafka.clients.producer.*;
import org.apache.kafka.common.serialization.*;

public class LabWorkload {
    static Map<String, String> parseArgs(String[] args) {
        Map<String, String> m = new HashMap<>();
        for (int i = 0; i + 1 < args.length; i += 2) {
            m.put(args[i].replaceFirst("^--", ""), args[i + 1]);
        }
        return m;
    }

    static final AtomicBoolean stop = new AtomicBoolean(false);

    static double nowMicros() {
        Instant t = Instant.now();
        return t.getEpochSecond() * 1_000_000.0 + t.getNano() / 1000;
    }

    /** One record's outcome, completed by the producer's I/O thread. */
    static final class Pending implements Callback {
        volatile Future<RecordMetadata> future;
        final double sendUs;
        volatile double ackUs;
        volatile RecordMetadata md;
        volatile Exception err;
        final BlockingQueue<Pending> done;

        Pending(double sendUs, BlockingQueue<Pending> done) {
            this.sendUs = sendUs;
            this.done = done;
        }

        @Override
        public void onCompletion(RecordMetadata metadata, Exception exception) {
            ackUs = nowMicros();
            md = metadata;
            err = exception;
            done.add(this);
        }
    }

    static Field batchIndexField;

    static int batchIndex(Future<RecordMetadata> f) {
        try {
            if (batchIndexField == null) {
                Field fld = f.getClass().getDeclaredField("batchIndex");
                fld.setAccessible(true);
                batchIndexField = fld;
            }
            return batchIndexField.getInt(f);
        } catch (Exception e) {
            return -1;
        }
    }

    /** Aggregates record outcomes into batches (partition, baseOffset). */
    static final class Acks {
        final String name;
        final String acks;
        final Map<String, long[]> batches = new LinkedHashMap<>(); // key -> [partition, base, records, bytes]
        final Map<String, double[]> times = new HashMap<>();       // key -> [firstSendUs, lastAckUs]
        final Map<String, Long> errors = new TreeMap<>();
        long recordsAcked = 0, recordsFailed = 0, bytesAcked = 0;

        Acks(String name, String acks) {
            this.name = name;
            this.acks = acks;
        }

        void add(Pending p, int valueBytes) {
            if (p.err != null) {
                recordsFailed++;
                errors.merge(p.err.getClass().getSimpleName(), 1L, Long::sum);
                return;
            }
            int bi = batchIndex(p.future);
            long base = bi >= 0 ? p.md.offset() - bi : -1;
            String key = p.md.partition() + ":" + base;
            long[] b = batches.computeIfAbsent(key, k -> new long[]{p.md.partition(), base, 0, 0});
            b[2]++;
            b[3] += valueBytes;
            double[] t = times.computeIfAbsent(key, k -> new double[]{Double.MAX_VALUE, 0});
            t[0] = Math.min(t[0], p.sendUs);
            t[1] = Math.max(t[1], p.ackUs);
            recordsAcked++;
            bytesAcked += valueBytes;
        }
    }

    static Thread producerThread(String name, String bootstrap, String topic, String acks, double rate,
                                 int size, int keys, Properties extra, long endNanos, Acks out, long seed,
                                 AtomicLong sentCounter) {
        return new Thread(() -> {
            Properties p = new Properties();
            p.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
            p.put(ProducerConfig.CLIENT_ID_CONFIG, name);
            p.put(ProducerConfig.ACKS_CONFIG, acks);
            p.put(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, acks.equals("all") || acks.equals("-1") ? "true" : "false");
            p.putAll(extra);
            BlockingQueue<Pending> done = new LinkedBlockingQueue<>();
            Map<Pending, Integer> sizes = new ConcurrentHashMap<>();
            Random rnd = new Random(seed);
            try (KafkaProducer<byte[], byte[]> producer =
                         new KafkaProducer<>(p, new ByteArraySerializer(), new ByteArraySerializer())) {
                long intervalNanos = (long) (1e9 / rate);
                long next = System.nanoTime();
                while (!stop.get() && System.nanoTime() < endNanos) {
                    long now = System.nanoTime();
                    if (now < next) {
                        long sl = next - now;
                        Thread.sleep(sl / 1_000_000, (int) (sl % 1_000_000));
                        continue;
                    }
                    next += intervalNanos;
                    if (System.nanoTime() - next > 1_000_000_000L) next = System.nanoTime(); // no burst after a stall
                    int sz = Math.max(1, size / 2 + rnd.nextInt(size + 1));
                    byte[] value = new byte[sz];
                    rnd.nextBytes(value);
                    // --keys 0: no key, so the producer's partitioner picks the partition (sticky, adaptive)
                    byte[] key = keys > 0 ? ("k" + rnd.nextInt(keys)).getBytes(StandardCharsets.UTF_8) : null;
                    Pending pe = new Pending(nowMicros(), done);
                    sizes.put(pe, sz);
                    pe.future = producer.send(new ProducerRecord<>(topic, key, value), pe);
                    sentCounter.incrementAndGet();
                    drain(done, sizes, out);
                }
                producer.flush();
                drain(done, sizes, out);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            } catch (Exception e) {
                System.err.println(name + " failed: " + e);
                e.printStackTrace();
            }
            drain(done, sizes, out);
        }, name);
    }

    /** One producer per acks setting with a share of the rate: acks=1 only with a share above 0, acks=all
     *  only below 1. A producer alone (share 0 or 1) draws the same keys whichever acks it uses, so two runs
     *  that differ only in the share replay the same workload (a paired what-if recording). */
    static List<Thread> producers(String bootstrap, String topic, double rate, double acks1Share, int size, int keys,
                                  Properties extra, long endNanos, Acks all, Acks one, long seed,
                                  AtomicLong sentAll, AtomicLong sentOne) {
        List<Thread> threads = new ArrayList<>();
        if (acks1Share < 1) {
            threads.add(producerThread(all.name, bootstrap, topic, "all", rate * (1 - acks1Share), size, keys, extra,
                    endNanos, all, seed, sentAll));
        }
        if (acks1Share > 0) {
            threads.add(producerThread(one.name, bootstrap, topic, "1", rate * acks1Share, size, keys, extra,
                    endNanos, one, acks1Share >= 1 ? seed : seed + 1, sentOne));
        }
        return threads;
    }

    static void drain(BlockingQueue<Pending> done, Map<Pending, Integer> sizes, Acks out) {
        Pending pe;
        while ((pe = done.poll()) != null) {
            while (pe.future == null) Thread.onSpinWait(); // set right after send() returns
            Integer sz = sizes.remove(pe);
            out.add(pe, sz == null ? 0 : sz);
        }
    }

    public static void main(String[] argv) throws Exception {
        Map<String, String> a = parseArgs(argv);
        String bootstrap = a.get("bootstrap");
        String topic = a.get("topic");
        double duration = Double.parseDouble(a.getOrDefault("duration-s", "60"));
        double warmup = Double.parseDouble(a.getOrDefault("warmup-s", "0"));
        double rate = Double.parseDouble(a.getOrDefault("rate", "200"));
        double acks1Share = Double.parseDouble(a.getOrDefault("acks1-share", "0.15"));
        int size = Integer.parseInt(a.getOrDefault("size", "512"));
        int keys = Integer.parseInt(a.getOrDefault("keys", "1000"));
        boolean consume = Boolean.parseBoolean(a.getOrDefault("consumer", "true"));
        Path outDir = Paths.get(a.get("out"));
        Files.createDirectories(outDir);

        Properties extra = new Properties();
        extra.put(ProducerConfig.LINGER_MS_CONFIG, a.getOrDefault("linger-ms", "5"));
        extra.put(ProducerConfig.REQUEST_TIMEOUT_MS_CONFIG, a.getOrDefault("request-timeout-ms", "30000"));
        extra.put(ProducerConfig.DELIVERY_TIMEOUT_MS_CONFIG, a.getOrDefault("delivery-timeout-ms", "120000"));
        extra.put(ProducerConfig.COMPRESSION_TYPE_CONFIG, a.getOrDefault("compression", "none"));

        Runtime.getRuntime().addShutdownHook(new Thread(() -> stop.set(true)));
        Acks all = new Acks("lab-producer-acks-all", "all");
        Acks one = new Acks("lab-producer-acks-1", "1");
        AtomicLong sentAll = new AtomicLong(), sentOne = new AtomicLong();
        AtomicLong consumed = new AtomicLong();
        Thread consumer = null;
        if (consume) {
            consumer = new Thread(() -> {
                Properties c = new Properties();
                c.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
                c.put(ConsumerConfig.GROUP_ID_CONFIG, "lab-consumer-group");
                c.put(ConsumerConfig.CLIENT_ID_CONFIG, "lab-consumer");
                c.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
                try (KafkaConsumer<byte[], byte[]> cons =
                             new KafkaConsumer<>(c, new ByteArrayDeserializer(), new ByteArrayDeserializer())) {
                    cons.subscribe(Collections.singletonList(topic));
                    while (!stop.get()) {
                        consumed.addAndGet(cons.poll(Duration.ofMillis(500)).count());
                    }
                } catch (Exception e) {
                    System.err.println("consumer failed: " + e);
                }
            }, "lab-consumer");
            consumer.start();
        }
        if (warmup > 0) {
            // The same producers' code runs first, unrecorded, in this JVM, so that neither the
            // brokers nor this client are JIT-cold when the recorded window starts.
            Acks wAll = new Acks(all.name, all.acks), wOne = new Acks(one.name, one.acks);
            List<Thread> warm = producers(bootstrap, topic, rate, acks1Share, size, keys, extra,
                    System.nanoTime() + (long) (warmup * 1e9), wAll, wOne, 100, new AtomicLong(), new AtomicLong());
            for (Thread t : warm) t.start();
            for (Thread t : warm) t.join();
            // every warm-up batch is acknowledged (flushed); the brokers log a request after its
            // response is sent, so leave them a moment before the recorded window starts
            Thread.sleep(1000);
            consumed.set(0);
        }
        System.out.println("recording_from_us " + Math.round(nowMicros()));
        System.out.flush();
        List<Thread> threads = producers(bootstrap, topic, rate, acks1Share, size, keys, extra,
                System.nanoTime() + (long) (duration * 1e9), all, one, 1, sentAll, sentOne);
        for (Thread t : threads) t.start();
        Thread progress = new Thread(() -> {
            while (!stop.get()) {
                try { Thread.sleep(10_000); } catch (InterruptedException e) { return; }
                System.out.println("progress sent_all=" + sentAll.get() + " sent_1=" + sentOne.get()
                        + " consumed=" + consumed.get());
                System.out.flush();
            }
        });
        progress.setDaemon(true);
        progress.start();
        for (Thread t : threads) t.join();
        // let the consumer read the tail, then stop it
        Thread.sleep(3000);
        stop.set(true);
        if (consumer != null) consumer.join(15_000);

        StringBuilder js = new StringBuilder("{\"producers\":[");
        boolean first = true;
        for (Acks x : new Acks[]{all, one}) {
            if ((x == one && acks1Share <= 0) || (x == all && acks1Share >= 1)) continue;
            long sent = x == all ? sentAll.get() : sentOne.get();
            try (PrintWriter w = new PrintWriter(Files.newBufferedWriter(outDir.resolve("batches-" + x.name + ".csv")))) {
                w.println("client_id,acks,partition,base_offset,records,value_bytes,first_send_us,ack_us");
                for (Map.Entry<String, long[]> e : x.batches.entrySet()) {
                    long[] b = e.getValue();
                    double[] t = x.times.get(e.getKey());
                    w.printf(Locale.ROOT, "%s,%s,%d,%d,%d,%d,%.0f,%.0f%n", x.name, x.acks, b[0], b[1], b[2], b[3], t[0], t[1]);
                }
            }
            if (!first) js.append(",");
            first = false;
            js.append("{\"client_id\":\"").append(x.name).append("\",\"acks\":\"").append(x.acks)
              .append("\",\"records_sent\":").append(sent)
              .append(",\"records_acked\":").append(x.recordsAcked)
              .append(",\"records_failed\":").append(x.recordsFailed)
              .append(",\"batches_acked\":").append(x.batches.size())
              .append(",\"value_bytes_acked\":").append(x.bytesAcked)
              .append(",\"errors\":{");
            boolean f2 = true;
            for (Map.Entry<String, Long> e : x.errors.entrySet()) {
                if (!f2) js.append(",");
                f2 = false;
                js.append("\"").append(e.getKey()).append("\":").append(e.getValue());
            }
            js.append("}}");
        }
        js.append("],\"records_consumed\":").append(consumed.get()).append("}");
        Files.write(outDir.resolve("summary.json"), js.toString().getBytes(StandardCharsets.UTF_8));
        System.out.println("summary " + js);
        System.exit(0);
    }
}
