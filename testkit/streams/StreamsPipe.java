// A Kafka Streams application for the tests: it copies one topic to another as a group of the Streams protocol
// (KIP-1071) when its properties say group.protocol=streams.
//   java -cp "$KAFKA_HOME/libs/*:streams-pipe.jar" StreamsPipe PROPERTIES INPUT OUTPUT [HOLD_AFTER]
// Given HOLD_AFTER, it copies that many records and then holds, still a member of its group, like an application
// stuck on a record: its committed offsets stay where they are (until max.poll.interval.ms). It runs until it is
// told to stop (SIGTERM), closing cleanly: its offsets committed, its member gone from the group.
import java.io.FileInputStream;
import java.time.Duration;
import java.util.Properties;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.atomic.AtomicLong;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;

public final class StreamsPipe {
    private static final CountDownLatch STOPPING = new CountDownLatch(1);

    public static void main(String[] args) throws Exception {
        Properties props = new Properties();
        try (FileInputStream in = new FileInputStream(args[0])) {
            props.load(in);
        }
        props.putIfAbsent(StreamsConfig.DEFAULT_KEY_SERDE_CLASS_CONFIG, Serdes.ByteArraySerde.class);
        props.putIfAbsent(StreamsConfig.DEFAULT_VALUE_SERDE_CLASS_CONFIG, Serdes.ByteArraySerde.class);
        long holdAfter = args.length > 3 ? Long.parseLong(args[3]) : Long.MAX_VALUE;
        AtomicLong copied = new AtomicLong();
        StreamsBuilder builder = new StreamsBuilder();
        builder.<byte[], byte[]>stream(args[1]).peek((key, value) -> {
            if (copied.incrementAndGet() > holdAfter) {
                hold();
            }
        }).to(args[2]);
        KafkaStreams streams = new KafkaStreams(builder.build(), props);
        CountDownLatch closed = new CountDownLatch(1);
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            STOPPING.countDown();
            streams.close(Duration.ofSeconds(30));
            closed.countDown();
        }));
        streams.start();
        closed.await();
    }

    private static void hold() {
        try {
            STOPPING.await();
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }
}
