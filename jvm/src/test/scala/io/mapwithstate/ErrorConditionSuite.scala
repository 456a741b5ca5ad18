package io.mapwithstate

import java.nio.file.{Files, Paths}

import scala.jdk.CollectionConverters._

import org.apache.spark.SparkThrowable
import org.scalatest.funsuite.AnyFunSuite

/** The conditions of [[ErrorCondition]] against the table of docs/errors.md, and the contract. */
class ErrorConditionSuite extends AnyFunSuite {

  /** (condition, SQLSTATE) of each row of the table in docs/errors.md, in order. */
  private lazy val documented: Seq[(String, String)] = {
    val doc = Paths.get(sys.props("mapwithstate.root"), "docs", "errors.md")
    val Row = """\|\s*`(MAPWITHSTATE_[A-Z_.]+)`\s*\|\s*(\w+)\s*\|.*""".r
    Files.readAllLines(doc).asScala.toSeq.collect { case Row(name, sqlState) => (name, sqlState) }
  }

  test("docs/errors.md lists every condition, with its SQLSTATE, in the object's order") {
    assert(documented == ErrorCondition.all.map(c => (c.name, c.sqlState)))
  }

  test("every condition object is in ErrorCondition.all, once") {
    // Each case object is a class ErrorCondition$<Name>$ beside ErrorCondition's own.
    val classes = Paths.get(classOf[ErrorCondition].getResource("ErrorCondition.class").toURI)
      .getParent
    val Module = """ErrorCondition\$(\w+)\$\.class""".r
    val declared = Files.list(classes).iterator().asScala.toSeq.map(_.getFileName.toString)
      .collect { case Module(name) => name }
      .map(name =>
        Class.forName(s"io.mapwithstate.ErrorCondition$$$name$$")
          .getField("MODULE$").get(null))
      .collect { case c: ErrorCondition => c }
    assert(declared.nonEmpty)
    assert(declared.toSet == ErrorCondition.all.toSet)
    assert(ErrorCondition.all.map(_.name).distinct.size == ErrorCondition.all.size)
  }

  test("an exception is a SparkThrowable with its condition, SQLSTATE and parameters") {
    val e = new MapWithStateException(ErrorCondition.TypeMismatch, "remove must be a BOOLEAN",
      parameters = Map("argument" -> "remove"))
    val thrown: SparkThrowable = e
    assert(thrown.getCondition == "MAPWITHSTATE_TYPE_MISMATCH")
    assert(thrown.getSqlState == "42K09")
    assert(thrown.getMessageParameters.asScala ==
      Map("message" -> "remove must be a BOOLEAN", "argument" -> "remove"))
    assert(e.getMessage == "[MAPWITHSTATE_TYPE_MISMATCH] remove must be a BOOLEAN")
    assert(e.isInstanceOf[IllegalArgumentException])
    assert(!thrown.isInternalError)
  }
}
