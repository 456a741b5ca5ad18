package io.mapwithstate

import org.apache.spark.sql.classic.SparkSession
import org.scalatest.{BeforeAndAfterAll, Suite}

/**
 * A local classic Spark session for one suite, with mapwithstate's planner extension
 * installed (the classes are on the test class path), stopped after the suite.
 */
trait LocalSpark extends BeforeAndAfterAll { self: Suite =>
  @transient protected var spark: SparkSession = _

  override def beforeAll(): Unit = {
    super.beforeAll()
    spark = SparkSession.builder().master("local[2]").appName(suiteName)
      .config("spark.sql.shuffle.partitions", "2")
      .config("spark.sql.extensions", classOf[MapWithStateExtensions].getName)
      .getOrCreate()
  }

  override def afterAll(): Unit = {
    try if (spark != null) spark.stop()
    finally super.afterAll()
  }
}
