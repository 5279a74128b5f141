"""Real Apache Kafka in the loop: a KRaft cluster of separate JVMs on loopback (cluster.py), the
jars it runs from Maven Central (jars.py), a client that records every acknowledgement
(client.py), and the re-election finding of issue 29 replayed on real brokers (finding.py).
See docs/REAL_KAFKA.md."""
