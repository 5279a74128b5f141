// The admin calls the Python client (confluent-kafka) lacks, through Kafka's own Java Admin:
// a preferred (or unclean) election that gets past a paused broker, reassignment, and a describe that shows the ELR (KIP-966). One call a run;
// the answer is one line of JSON on stdout. Our own code, compiled at first use by jars.py.
import java.util.*;
import org.apache.kafka.clients.admin.*;
import org.apache.kafka.common.*;

public class Probe {
    static String ids(List<Node> nodes) {
        StringBuilder b = new StringBuilder("[");
        for (int i = 0; i < nodes.size(); i++) b.append(i == 0 ? "" : ",").append(nodes.get(i).id());
        return b.append("]").toString();
    }

    static Admin admin(String bootstrap, int timeoutMs) {
        Properties p = new Properties();
        p.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(AdminClientConfig.REQUEST_TIMEOUT_MS_CONFIG, String.valueOf(timeoutMs));
        p.put(AdminClientConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, String.valueOf(timeoutMs + 500));
        return Admin.create(p);
    }

    public static void main(String[] a) throws Exception {
        String cmd = a[0];
        TopicPartition tp = new TopicPartition(a[2], Integer.parseInt(a[3]));
        if (cmd.equals("elect")) {
            // a[4]: PREFERRED or UNCLEAN. The Admin sends ElectLeaders to the "controller" of the
            // Metadata response, which a KRaft broker picks at random among the unfenced brokers
            // (KRaftMetadataCache.getRandomAliveBrokerId); the broker forwards it to the real
            // controller. A paused broker never answers the new connection's ApiVersions, so the
            // request is never sent to it: time out and try again with a fresh Admin.
            ElectionType type = ElectionType.valueOf(a[4]);
            for (int attempt = 1; ; attempt++) {
                Admin admin = admin(a[1], 1200);
                try {
                    ElectLeadersOptions o = new ElectLeadersOptions().timeoutMs(1500);
                    Map<TopicPartition, Optional<Throwable>> r = admin.electLeaders(type, Set.of(tp), o).partitions().get();
                    Optional<Throwable> e = r.getOrDefault(tp, Optional.empty());
                    System.out.println("{\"attempts\": " + attempt + ", \"error\": " + (e.isPresent() ? "\""
                            + e.get().getClass().getSimpleName() + "\"" : "null") + "}");
                    return;
                } catch (java.util.concurrent.ExecutionException x) {
                    if (!(x.getCause() instanceof org.apache.kafka.common.errors.TimeoutException) || attempt >= 12) throw x;
                } finally {
                    admin.close(java.time.Duration.ZERO);  // do not wait for the call stuck on a paused broker
                }
            }
        } else if (cmd.equals("describe")) {
            try (Admin admin = admin(a[1], 10000)) {
                TopicDescription d = admin.describeTopics(List.of(tp.topic())).allTopicNames().get().get(tp.topic());
                TopicPartitionInfo i = d.partitions().get(tp.partition());
                System.out.println("{\"leader\": " + (i.leader() == null ? -1 : i.leader().id()) + ", \"replicas\": "
                        + ids(i.replicas()) + ", \"isr\": " + ids(i.isr()) + ", \"elr\": " + ids(i.elr())
                        + ", \"last_known_elr\": " + ids(i.lastKnownElr()) + "}");
            }
        } else if (cmd.equals("reassign")) {
            // a[4]: the new replicas, comma-separated, or "cancel"
            try (Admin admin = admin(a[1], 10000)) {
                Optional<NewPartitionReassignment> target = Optional.empty();
                if (!a[4].equals("cancel")) {
                    List<Integer> replicas = new ArrayList<>();
                    for (String s : a[4].split(",")) replicas.add(Integer.parseInt(s));
                    target = Optional.of(new NewPartitionReassignment(replicas));
                }
                admin.alterPartitionReassignments(Map.of(tp, target)).all().get();
                System.out.println("{\"error\": null}");
            }
        } else {
            throw new IllegalArgumentException("unknown command " + cmd);
        }
    }
}
