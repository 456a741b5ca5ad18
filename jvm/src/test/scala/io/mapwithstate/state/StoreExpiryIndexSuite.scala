package io.mapwithstate.state

import java.nio.file.Files

import scala.collection.mutable
import scala.util.Random

import io.mapwithstate.LocalSpark
import org.apache.spark.network.util.JavaUtils
import org.apache.spark.sql.catalyst.InternalRow
import org.apache.spark.sql.catalyst.expressions.UnsafeProjection
import org.apache.spark.sql.types.{IntegerType, LongType, StringType, StructType}
import org.apache.spark.unsafe.types.UTF8String
import org.scalatest.funsuite.AnyFunSuite

/**
 * The RocksDB backend's expiry index ([[StoreExpiryIndex]] behind
 * [[StoreBackedStateMap.expiring]]) on Spark's real RocksDB store: random puts (with and
 * without a time), removes and expiry rounds, one store version per round, committed, with
 * reloads from the checkpoint (a new provider, as after a restart) and rounds without
 * timeouts (the index not kept, so rebuilt later), each checked against a brute-force model
 * and against a full scan — the shape of [[ExpiryIndexSuite]] for the heap index.
 */
class StoreExpiryIndexSuite extends AnyFunSuite with LocalSpark {
  import StateMapSuite._

  private val keySchema = new StructType().add("k", LongType)
  private val stateType = new StructType().add("s", LongType)

  for (seed <- 1 to 4) test(s"random puts, removes, reloads and expiry rounds (seed $seed)") {
    assert(spark != null) // a live SparkEnv, as on an executor
    val random = new Random(seed)
    val model = mutable.Map.empty[Long, (Long, Long)]
    val root = Files.createTempDirectory("store-expiry-index").toFile
    var version = 0L
    var now = 0L
    try {
      while (version < 40) {
        RocksDBTestStores.withProvider(root.toURI.toString, keySchema, stateType) { provider =>
          // A few versions per provider, then a reload from the checkpoint.
          for (_ <- 0 to random.nextInt(4) if version < 40) {
            val store = provider.getStore(version)
            val map = new StoreBackedStateMap(store, keySchema, stateType)
            // One round in six has no timeouts: the index is not kept and must not be trusted.
            val timeouts = random.nextInt(6) != 0
            if (timeouts) map.prepareExpiry()
            now += 10
            ExpiryRounds.run(random, map, model, now, version, 300, 200, s"version $version")
            assert(longEntries(map.getAll()).map(e => e._1 -> (e._2, e._3)).toMap === model.toMap)
            if (timeouts) {
              // Every key with a time has an entry at or before it; entries are in time order.
              val index = store.iterator(StoreExpiryIndex.ColumnFamily)
              val entries =
                try index.map(e => (e.key.getLong(0), e.key.getLong(1))).toList
                finally index.close()
              assert(entries.map(_._1).sorted === entries.map(_._1))
              val earliest = entries.groupBy(_._2).map { case (k, es) => k -> es.map(_._1).min }
              model.foreach { case (k, (_, t)) =>
                if (t != StateMap.NoTime) assert(earliest.get(k).exists(_ <= t), s"key $k at $t")
              }
            }
            if (random.nextInt(8) == 0) {
              // A failed task: the version is rolled back, and the model with it.
              store.abort()
              val committed = provider.getStore(version)
              model.clear()
              new StoreBackedStateMap(committed, keySchema, stateType).getAll()
                .foreach(e => model(e.key.getLong(0)) = (e.state.getLong(0), e.updateTime))
              committed.abort()
            } else {
              map.flush()
              version = store.commit()
              // The index's rows are not counted among the state's rows.
              assert(map.keyCount === model.size, s"version $version")
            }
          }
        }
      }
    } finally JavaUtils.deleteRecursively(root)
  }

  test("keys of non-nullable columns of any type (the index's mark has null ones)") {
    val strings = new StructType().add("w", StringType, nullable = false).add("i", IntegerType,
      nullable = false)
    val key = UnsafeProjection.create(strings)
    val root = Files.createTempDirectory("store-expiry-index-strings").toFile
    try RocksDBTestStores.withProvider(root.toURI.toString, strings, stateType) { provider =>
        val store = provider.getStore(0L)
        val map = new StoreBackedStateMap(store, strings, stateType)
        map.prepareExpiry()
        map.put(key(InternalRow(UTF8String.fromString("b"), 2)).copy(), longState(2), 20L)
        map.put(key(InternalRow(UTF8String.fromString("a"), 1)).copy(), longState(1), 10L)
        assert(map.expiring(21L).map(e => (e.key.getString(0), e.key.getInt(1), e.updateTime))
          .toList === List(("a", 1, 10L), ("b", 2, 20L)))
        store.abort()
      }
    finally JavaUtils.deleteRecursively(root)
  }
}
