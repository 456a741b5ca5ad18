package io.mapwithstate.bench

import java.util.Properties
import java.util.concurrent.TimeUnit
import java.util.concurrent.locks.LockSupport

import org.apache.kafka.clients.producer.{KafkaProducer, ProducerConfig, ProducerRecord}
import org.apache.kafka.common.serialization.StringSerializer

/**
 * L1's producer (bench/latency.py): writes records to the input topic at a fixed rate, spread
 * evenly over time, as the sources whose latency L1 measures produce them (a payment, a click:
 * one at a time, not in bursts).
 *
 * Record i has the key `i % keys` and the value `i`; its Kafka timestamp is set by the producer
 * as it is sent, which is where L1's latency starts. Every millisecond the producer sends the
 * records due by then (`rate` per second since it started), so at 10,000 records a second
 * each millisecond holds about ten and no record is sent more than about a millisecond after
 * it is due. A Spark query of the rate source (L1's producer before) sends a micro-batch's
 * records at once, every 50 ms or more on a busy machine: the pipelines then receive bursts,
 * and a burst's last record waits for the others, which is the producer's latency, not the
 * pipeline's. Nothing is batched on purpose: `linger.ms` 0.
 *
 * Arguments: `<bootstrap servers> <topic> <records a second> <keys> <seconds>`. Run on the
 * Kafka broker's class path (kafka-clients, Scala's library) plus the bench jar; it prints
 * how many records it sent, and how many were sent more than 5 ms after they were due.
 */
object FixedRateProducer {

  def main(args: Array[String]): Unit = {
    require(args.length == 5,
      "usage: FixedRateProducer <bootstrap servers> <topic> <records a second> <keys> <seconds>")
    val Array(bootstrap, topic, rateArg, keysArg, secondsArg) = args
    val (rate, keys, seconds) = (rateArg.toLong, keysArg.toLong, secondsArg.toLong)
    require(rate > 0 && keys > 0 && seconds > 0, "rate, keys and seconds must be positive")
    val props = new Properties()
    props.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap)
    props.put(ProducerConfig.LINGER_MS_CONFIG, "0")
    props.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, classOf[StringSerializer].getName)
    props.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, classOf[StringSerializer].getName)
    val producer = new KafkaProducer[String, String](props)
    val tick = TimeUnit.MILLISECONDS.toNanos(1)
    val late = TimeUnit.MILLISECONDS.toNanos(5)
    val start = System.nanoTime()
    val end = start + TimeUnit.SECONDS.toNanos(seconds)
    var sent = 0L
    var sentLate = 0L
    try {
      var now = start
      while (now < end) {
        val due = (now - start) / 1000L * rate / 1000000L
        while (sent < due) {
          // When record `sent` was due, to count how many the producer itself held back.
          if (now - start - sent * 1000000000L / rate > late) sentLate += 1
          producer.send(new ProducerRecord(topic, (sent % keys).toString, sent.toString))
          sent += 1
        }
        LockSupport.parkNanos(tick)
        now = System.nanoTime()
      }
    } finally {
      producer.close()
    }
    println(s"sent $sent records, $sentLate of them more than 5 ms after they were due")
  }
}
