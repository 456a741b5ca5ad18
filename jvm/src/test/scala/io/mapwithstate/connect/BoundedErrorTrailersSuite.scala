package io.mapwithstate.connect

import scala.jdk.CollectionConverters._

import org.scalatest.funsuite.AnyFunSuite
import org.sparkproject.connect.google_protos.rpc.{Code, ErrorInfo, Status => RpcStatus}
import org.sparkproject.connect.grpc.{Metadata, Status}
import org.sparkproject.connect.grpc.protobuf.StatusProto
import org.sparkproject.connect.protobuf.{Any => AnyProto}

/**
 * The error trailers' bound: errors as Spark Connect's `ErrorUtils` builds them (a
 * `google.rpc.Status` with an `ErrorInfo`, turned into a status and trailers by gRPC's
 * `StatusProto`), shortened only when over budget and never losing the status code, the error
 * id, the SQL state or the class names.
 */
class BoundedErrorTrailersSuite extends AnyFunSuite {

  private val DetailsKey =
    Metadata.Key.of("grpc-status-details-bin", Metadata.BINARY_BYTE_MARSHALLER)

  /** An error as Spark Connect sends it: `message` (already cut to 2048 characters by Spark). */
  private def sparkError(
      message: String,
      parameters: String = """{"value":"x"}""",
      stackTrace: String = "at org.apache.spark.Foo.bar(Foo.scala:1)"): (Status, Metadata) = {
    val info = ErrorInfo.newBuilder()
      .setReason("org.apache.spark.SparkDateTimeException")
      .setDomain("org.apache.spark")
      .putMetadata("classes", """["org.apache.spark.SparkDateTimeException"]""")
      .putMetadata("sqlState", "22018")
      .putMetadata("errorClass", "CAST_INVALID_INPUT")
      .putMetadata("messageParameters", parameters)
      .putMetadata("errorId", "4b1c9e3a-0d7f-4a38-9a51-2d6a7e5b8c10")
      .putMetadata("stackTrace", stackTrace)
    val rpc = RpcStatus.newBuilder().setCode(Code.INTERNAL_VALUE).setMessage(message)
      .addDetails(AnyProto.pack(info.build())).build()
    val error = StatusProto.toStatusRuntimeException(rpc)
    (error.getStatus, error.getTrailers)
  }

  private def details(trailers: Metadata): RpcStatus = RpcStatus.parseFrom(trailers.get(DetailsKey))

  private def info(trailers: Metadata): Map[String, String] =
    details(trailers).getDetails(0).unpack(classOf[ErrorInfo]).getMetadataMap.asScala.toMap

  test("an error that fits is passed on as it is") {
    val (status, trailers) = sparkError("[CAST_INVALID_INPUT] The value 'x' cannot be cast.")
    val before = details(trailers)
    val (bounded, boundedTrailers) = BoundedErrorTrailers.bound(status, trailers)
    assert(bounded eq status)
    assert(details(boundedTrailers) == before)
  }

  test("an ordinary long error (2048 ASCII characters, as Spark cuts it) is passed on as it is") {
    val (status, trailers) = sparkError("e" * 2048, parameters = s"""{"value":"${"p" * 200}"}""")
    assert(BoundedErrorTrailers.sentSize(status, trailers) <= BoundedErrorTrailers.Budget)
    assert(BoundedErrorTrailers.bound(status, trailers)._1 eq status)
  }

  test("a message of multi-byte characters is cut to the budget in both places") {
    val message = "[CAST_INVALID_INPUT] The value '" + "\ufffd" * 2000 + "' cannot be cast."
    val (status, trailers) = sparkError(message)
    assert(BoundedErrorTrailers.sentSize(status, trailers) > 16 * 1024, "the case is not big")
    val (bounded, boundedTrailers) = BoundedErrorTrailers.bound(status, trailers)
    assert(BoundedErrorTrailers.sentSize(bounded, boundedTrailers) <= BoundedErrorTrailers.Budget)
    assert(bounded.getCode == Status.Code.INTERNAL)
    val description = bounded.getDescription
    assert(description.startsWith("[CAST_INVALID_INPUT] The value '\ufffd\ufffd"))
    assert(description.endsWith(s"(${message.length} characters in all; the whole error is in " +
        "the error details)"))
    assert(details(boundedTrailers).getMessage == description)
    assert(details(boundedTrailers).getCode == Code.INTERNAL_VALUE)
    // Small entries stay, the stack trace too, as the message alone made it fit.
    assert(info(boundedTrailers) == info(trailers))
  }

  test("ErrorInfo entries go, stack trace first, until the trailers fit") {
    val wide = "\u00e9" * 1000
    val (status, trailers) = sparkError("\ufffd" * 2048, parameters = s"""{"value":"$wide"}""",
      stackTrace = wide)
    val (bounded, boundedTrailers) = BoundedErrorTrailers.bound(status, trailers)
    assert(BoundedErrorTrailers.sentSize(bounded, boundedTrailers) <= BoundedErrorTrailers.Budget)
    val kept = info(boundedTrailers)
    assert(!kept.contains("stackTrace"))
    assert(kept("errorId") == "4b1c9e3a-0d7f-4a38-9a51-2d6a7e5b8c10")
    assert(kept("sqlState") == "22018")
    assert(kept("classes").contains("SparkDateTimeException"))
    // The parameters and their class go together, and only if the stack trace was not enough.
    assert(kept.contains("messageParameters") == kept.contains("errorClass"))
  }

  test("the message is cut at a character boundary, never inside a surrogate pair") {
    val message = "\ud83d\ude00" * 2048 // emoji: two UTF-16 units, four UTF-8 bytes each
    val short = BoundedErrorTrailers.shorten(message)
    assert(short.length < message.length)
    val kept = short.takeWhile(_ != ' ')
    assert(kept.nonEmpty && kept.length % 2 == 0 && kept == message.take(kept.length))
  }

  test("a status with no details, or an OK one, is handled") {
    val plain = Status.UNKNOWN.withDescription("\ufffd" * 2048)
    val (bounded, _) = BoundedErrorTrailers.bound(plain, new Metadata())
    assert(bounded.getCode == Status.Code.UNKNOWN)
    assert(BoundedErrorTrailers.sentSize(bounded, new Metadata()) <= BoundedErrorTrailers.Budget)
    assert(BoundedErrorTrailers.bound(Status.OK, new Metadata())._1 eq Status.OK)
  }
}
