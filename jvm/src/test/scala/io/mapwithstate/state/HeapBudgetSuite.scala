package io.mapwithstate.state

import io.mapwithstate.MapWithStateException
import org.apache.hadoop.conf.Configuration
import org.apache.spark.sql.catalyst.InternalRow
import org.apache.spark.sql.catalyst.expressions.UnsafeProjection
import org.apache.spark.sql.execution.streaming.state.{
  NoPrefixKeyStateEncoderSpec,
  StateStoreConf,
  StateStoreId
}
import org.apache.spark.sql.internal.SQLConf
import org.apache.spark.sql.types.{DataType, LongType, StringType, StructType}
import org.apache.spark.unsafe.types.UTF8String
import org.scalatest.funsuite.AnyFunSuite

/**
 * The heap budget of a partition's map: what the map says it holds (which the budget and the
 * operator's `memoryUsedBytes` metric report) against the heap the JVM sees it hold, and the
 * error past the limit.
 */
class HeapBudgetSuite extends AnyFunSuite {

  private val keys = UnsafeProjection.create(Array[DataType](StringType))
  private val states = UnsafeProjection.create(Array[DataType](LongType, LongType))

  private def fill(map: StateMap, from: Int, until: Int, budget: Option[HeapBudget] = None)
      : Unit = {
    var i = from
    while (i < until) {
      val key = keys(InternalRow(UTF8String.fromString(s"key-$i")))
      map.put(key, states(InternalRow(i.toLong, i * 3L)), i)
      budget.foreach(_.afterWrite(map))
      i += 1
    }
  }

  private def usedHeapAfterGc(): Long = {
    val runtime = Runtime.getRuntime
    var used = Long.MaxValue
    for (_ <- 1 to 5) {
      System.gc()
      Thread.sleep(50)
      used = math.min(used, runtime.totalMemory - runtime.freeMemory)
    }
    used
  }

  test("memoryUsedBytes is within 20% of the heap the map holds") {
    for (entries <- Seq(300000, 1000000)) {
      val before = usedHeapAfterGc()
      var map: DeltaChainStateMap = StateMap.empty(1, 2)
      fill(map, 0, entries)
      // A second version over the first, as a streaming store holds them.
      map = map.copy()
      fill(map, 0, entries / 10)
      val held = usedHeapAfterGc() - before
      val reported = map.memoryUsedBytes
      val error = math.abs(reported - held).toDouble / held
      assert(error <= 0.2,
        s"$entries entries: map reports $reported bytes, heap holds $held " +
          f"(${error * 100}%.1f%% off)")
      assert(map.size === entries) // keeps the map reachable until here
    }
  }

  test("crossing the budget fails naming the partition, the size, the limit and the ways out") {
    val map = StateMap.empty(1, 2)
    val budget = new HeapBudget(7, 1L << 20)
    val failure = intercept[MapWithStateException](fill(map, 0, 100000, Some(budget)))
    val message = failure.getMessage
    assert(message.contains("the state of partition 7 holds "))
    assert(message.contains("over the limit of 1.0 MB per partition " +
        "(spark.mapwithstate.stateStore.maxPartitionBytes)"))
    assert(
      message.contains("more partitions") && message.contains("StateSpec.backend(\"rocksdb\")"))
    // Checked as the map grows: it stopped within one check interval past the limit.
    assert(map.size < 100000)
    assert(map.memoryUsedBytes < (2L << 20))
  }

  test("the default limit shares the heap among the partitions of state the executor holds") {
    val limit = HeapBudget.defaultLimitBytes
    assert(
      limit > 0 && limit <= (Runtime.getRuntime.maxMemory * HeapBudget.DefaultHeapFraction).toLong)
    val gb = 1L << 30
    // One partition per core, or more partitions than cores: each gets its share of 40%.
    assert(HeapBudget.limitBytes(2 * gb, 2, 0) === (0.4 * gb).toLong)
    assert(HeapBudget.limitBytes(2 * gb, 2, 4) === (0.2 * gb).toLong)
    assert(HeapBudget.limitBytes(2 * gb, 8, 4) === (0.1 * gb).toLong)
  }

  test("an executor counts the heap state partitions it holds while their providers are open") {
    val before = DeltaChainStateStoreProvider.openProviders
    val root = java.nio.file.Files.createTempDirectory("heap-budget").toFile
    val keys = new StructType().add("k", LongType)
    val providers = (0 until 3).map { partition =>
      val provider = new DeltaChainStateStoreProvider
      provider.init(StateStoreId(root.toURI.toString, 0L, partition), keys, keys,
        NoPrefixKeyStateEncoderSpec(keys), false, new StateStoreConf(new SQLConf),
        new Configuration(), false, None)
      provider
    }
    try {
      assert(DeltaChainStateStoreProvider.openProviders === before + 3)
      providers.head.close()
      providers.head.close() // closing twice counts once
      assert(DeltaChainStateStoreProvider.openProviders === before + 2)
    } finally {
      providers.foreach(_.close())
      org.apache.spark.network.util.JavaUtils.deleteRecursively(root)
    }
    assert(DeltaChainStateStoreProvider.openProviders === before)
  }
}
