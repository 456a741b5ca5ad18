package io.mapwithstate.state

import java.nio.file.Files

import io.mapwithstate.LocalSpark
import org.apache.spark.network.util.JavaUtils
import org.apache.spark.sql.catalyst.InternalRow
import org.apache.spark.sql.catalyst.expressions.{UnsafeProjection, UnsafeRow}
import org.apache.spark.sql.execution.streaming.state.{StateStore, StateStoreProvider}
import org.apache.spark.sql.types.{DataType, IntegerType, LongType, StructType}
import org.scalatest.funsuite.AnyFunSuite

/**
 * The StateMap over Spark's real RocksDB state store: the per-key operations with update
 * times, the scans (while the scanned keys are removed, as timeouts do), and a committed
 * version read back by a new provider, as after a restart.
 */
class StoreBackedStateMapSuite extends AnyFunSuite with LocalSpark {

  private val keySchema = new StructType().add("k", LongType)
  private val stateType = new StructType().add("n", IntegerType)
  private val keyRow = UnsafeProjection.create(Array[DataType](LongType))
  private val stateRow = UnsafeProjection.create(Array[DataType](IntegerType))
  private def k(i: Long): UnsafeRow = keyRow(InternalRow(i)).copy()
  private def s(n: Int): UnsafeRow = stateRow(InternalRow(n)).copy()

  private def withStore[T](root: String)(f: StateStoreProvider => T): T =
    RocksDBTestStores.withProvider(root, keySchema, stateType)(f)

  private def map(store: StateStore) = new StoreBackedStateMap(store, keySchema, stateType)

  test("keys holding only a timer: no state, their timer, committed and read back") {
    assert(spark != null)
    val root = Files.createTempDirectory("store-backed-map").toFile
    val extremes = Seq(0L, 1L, -1L, StateMap.MaxTimerMagnitude, -StateMap.MaxTimerMagnitude)
    try {
      withStore(root.toURI.toString) { provider =>
        val store = provider.getStore(0L, None, false, false)
        val m = map(store)
        m.put(k(1), s(10), 100L)
        m.put(k(2), null, 200L)
        extremes.zipWithIndex.foreach { case (t, i) => m.put(k(10 + i), null, t) }
        m.put(k(20), s(20), -5L)
        m.put(k(21), null, Long.MaxValue) // clamped
        assert(m.get(k(2)) === null && m.contains(k(2)) && m.getTime(k(2)) === 200L)
        assert(m.getTime(k(20)) === -5L && m.get(k(20)).getInt(0) === 20)
        assert(m.getTime(k(21)) === StateMap.MaxTimerMagnitude)
        assert(m.size === 9)
        assert(m.getByTime(201L).map(e => (e.key.getLong(0), Option(e.state).map(_.getInt(0))))
          .toSet === Set((1L, Some(10)), (2L, None), (10L, None), (11L, None), (12L, None),
          (14L, None), (20L, Some(20))))
        assert(store.commit() === 1L)
      }
      withStore(root.toURI.toString) { provider =>
        val store = provider.getStore(1L, None, false, false)
        val m = map(store)
        extremes.zipWithIndex.foreach { case (t, i) =>
          assert(m.get(k(10 + i)) === null && m.getTime(k(10 + i)) === t)
        }
        assert(m.getAll().filter(_.state != null).map(_.key.getLong(0)).toSet === Set(1L, 20L))
        store.abort()
      }
    } finally JavaUtils.deleteRecursively(root)
  }

  test("a later task's map generates no code: its projections' classes are the JVM's") {
    val root = Files.createTempDirectory("store-backed-map").toFile
    try {
      withStore(root.toURI.toString) { provider =>
        val first = provider.getStore(0L, None, false, false)
        val m = map(first)
        m.prepareExpiry()
        m.put(k(1), s(10), 100L)
        m.put(k(2), null, 50L)
        assert(m.expiring(60L).map(_.key.getLong(0)).toList === List(2L))
        assert(first.commit() === 1L)
        val generated = FieldProjections.generations
        val next = provider.getStore(1L, None, false, false)
        val again = map(next)
        again.prepareExpiry()
        assert(again.get(k(1)).getInt(0) === 10)
        again.put(k(3), s(30), 300L)
        assert(again.expiring(60L).map(_.key.getLong(0)).toList === List(2L))
        assert(again.getAll().map(_.key.getLong(0)).toSet === Set(1L, 2L, 3L))
        assert(FieldProjections.generations === generated)
        next.abort()
      }
    } finally JavaUtils.deleteRecursively(root)
  }

  test("put, get, remove and scans by update time, committed and read back") {
    assert(spark != null) // a live SparkEnv, as on an executor
    val root = Files.createTempDirectory("store-backed-map").toFile
    try {
      withStore(root.toURI.toString) { provider =>
        val store = provider.getStore(0L, None, false, false)
        val m = map(store)
        (1 to 10).foreach(i => m.put(k(i), s(i * 10), i * 100L))
        assert(m.get(k(3)).getInt(0) === 30)
        assert(m.get(k(11)) === null)
        assert(m.contains(k(4)) && !m.contains(k(12)))
        m.putInPlace(k(3), s(31), 1000L)
        m.remove(k(10))
        assert(m.size === 9)
        // Keys updated before 500: 1..4 except 3; removed while the scan runs, as timeouts do.
        val timingOut = m.getByTime(500L).map { e =>
          m.remove(e.key)
          (e.key.getLong(0), e.state.getInt(0), e.updateTime)
        }.toList.sortBy(_._1)
        assert(timingOut === List((1L, 10, 100L), (2L, 20, 200L), (4L, 40, 400L)))
        assert(m.getAll().map(e => (e.key.getLong(0), e.state.getInt(0))).toList.sortBy(_._1) ===
          List((3L, 31), (5L, 50), (6L, 60), (7L, 70), (8L, 80), (9L, 90)))
        assert(store.commit() === 1L)
      }
      withStore(root.toURI.toString) { provider =>
        val store = provider.getStore(1L, None, false, false)
        val m = map(store)
        assert(m.size === 6)
        assert(m.getAll().map(e => (e.key.getLong(0), e.updateTime)).toList.sortBy(_._1) ===
          List((3L, 1000L), (5L, 500L), (6L, 600L), (7L, 700L), (8L, 800L), (9L, 900L)))
        store.abort()
      }
    } finally JavaUtils.deleteRecursively(root)
  }

  test("the map counts its keys and commits the count; a store without one is counted once") {
    assert(spark != null)
    val root = Files.createTempDirectory("store-backed-map").toFile
    try {
      withStore(root.toURI.toString) { provider =>
        val store = provider.getStore(0L, None, false, false)
        val m = map(store)
        (1 to 5).foreach(i => m.put(k(i), s(i), i * 100L))
        m.put(k(2), s(20), 250L) // an update: no new key
        m.remove(k(3))
        m.remove(k(99)) // not there: no key less
        m.put(k(6), null, 600L) // only a timer: a key
        m.remove(k(6))
        m.put(k(6), null, 650L) // gone and back in one version
        assert(m.keyCount === 5 && m.size === 5)
        // Committed without the count, as by a version before the map counted.
        assert(store.commit() === 1L)
      }
      withStore(root.toURI.toString) { provider =>
        val store = provider.getStore(1L, None, false, false)
        assert(new StoreKeyCount(store).stored === None)
        val m = map(store) // counts version 1 by a scan
        assert(m.keyCount === 5)
        m.remove(k(1))
        m.remove(k(6))
        m.put(k(7), s(7), 700L)
        assert(m.keyCount === 4)
        m.flush()
        assert(store.commit() === 2L)
      }
      withStore(root.toURI.toString) { provider =>
        val store = provider.getStore(2L, None, false, false)
        assert(new StoreKeyCount(store).stored === Some(4L))
        val m = map(store)
        assert(m.keyCount === 4 && m.getAll().size === 4)
        m.flush() // nothing changed: the count stays as committed
        assert(new StoreKeyCount(store).stored === Some(4L))
        store.abort()
      }
    } finally JavaUtils.deleteRecursively(root)
  }

  test("a snapshot written from the map's entries reads back as the same state, keys holding " +
    "only a timer included") {
    val root = Files.createTempDirectory("store-backed-snapshot").toFile
    try {
      withStore(root.toURI.toString) { provider =>
        val store = provider.getStore(0L, None, false, false)
        val m = map(store)
        (1 to 50).foreach(i => m.put(k(i), s(i * 10), i * 100L))
        m.put(k(60), null, 600L)
        m.put(k(61), s(61), StateMap.NoTime)
        val bytes = new java.io.ByteArrayOutputStream()
        StateMapSerde.writeSnapshot(m, new java.io.DataOutputStream(bytes))
        val read = StateMapSerde.readSnapshot(
          new java.io.DataInputStream(new java.io.ByteArrayInputStream(bytes.toByteArray)), 1, 1)
        def contents(sm: StateMap): Map[Long, (Option[Int], Long)] = sm.getAll()
          .map(e => e.key.getLong(0) -> (Option(e.state).map(_.getInt(0)), e.updateTime)).toMap
        assert(read.size === 52)
        assert(contents(read) === contents(m))
        assert(contents(read)(60L) === ((None, 600L)))
        store.abort()
      }
    } finally JavaUtils.deleteRecursively(root)
  }
}
