package io.mapwithstate.connect

import java.nio.charset.StandardCharsets.UTF_8

import scala.jdk.CollectionConverters._
import scala.util.control.NonFatal

import org.sparkproject.connect.google_protos.rpc.{ErrorInfo, Status => RpcStatus}
import org.sparkproject.connect.grpc.{
  ForwardingServerCall,
  Metadata,
  ServerCall,
  ServerCallHandler,
  ServerInterceptor,
  Status
}
import org.sparkproject.connect.protobuf.{Any => AnyProto}

/**
 * A gRPC server interceptor that keeps every error's trailers small enough for a default gRPC
 * client to read them.
 *
 * Spark Connect sends an error as trailers: the message (`grpc-message`, up to 2048 characters,
 * percent-encoded byte by byte outside printable ASCII) and a `google.rpc.Status` holding the
 * message again and an `ErrorInfo`. A message made of multi-byte characters — a value quoted in
 * a cast error, say, from data a client sent — then takes up to ~18 KB of trailers, over the
 * 8 KB a gRPC client reads by default (it refuses at random up to 16 KB): the Python client
 * gets `RESOURCE_EXHAUSTED` and a `ValueError` about mismatched status codes, or a reset
 * stream, instead of the error. Nothing
 * is lost by shortening them: PySpark fetches the whole error (message, parameters, causes)
 * with the separate `FetchErrorDetails` call, by the `errorId` the trailers carry.
 *
 * So a trailer set over [[Budget]] bytes (as sent) is shortened, in order, until it fits: the
 * message (in both places) to [[MessageBudget]] encoded bytes, then the `ErrorInfo`'s
 * `stackTrace` and `messageParameters` entries (with `errorClass`, as Spark itself leaves them
 * out together when the parameters are too long). The status code, `errorId`, `sqlState` and
 * the class names stay. Registered with `spark.connect.grpc.interceptor.classes`.
 */
class BoundedErrorTrailers extends ServerInterceptor {

  override def interceptCall[Req, Resp](
      call: ServerCall[Req, Resp],
      headers: Metadata,
      next: ServerCallHandler[Req, Resp]): ServerCall.Listener[Req] = {
    val bounded = new ForwardingServerCall.SimpleForwardingServerCall[Req, Resp](call) {
      override def close(status: Status, trailers: Metadata): Unit = {
        // Never in the way of closing the call: a failure here would leave the client hanging.
        val (boundedStatus, boundedTrailers) =
          try BoundedErrorTrailers.bound(status, trailers)
          catch { case NonFatal(_) => (status, trailers) }
        super.close(boundedStatus, boundedTrailers)
      }
    }
    next.startCall(bounded, headers)
  }
}

object BoundedErrorTrailers {

  /**
   * Trailers, as sent, above which they are shortened: three quarters of the 8 KB a default
   * gRPC client reads (between 8 and 16 KB it refuses at random), so that an ordinary error of
   * 2048 ASCII characters with its `ErrorInfo` passes untouched.
   */
  val Budget: Int = 6144

  /** The encoded bytes a shortened message keeps. */
  val MessageBudget: Int = 1024

  /** What HTTP/2 counts per header besides its name and value (RFC 7541, 4.1). */
  private val HeaderOverhead = 32

  private val DetailsKey =
    Metadata.Key.of("grpc-status-details-bin", Metadata.BINARY_BYTE_MARSHALLER)

  /** `ErrorInfo` entries left out, in this order, while the trailers are over budget. */
  private val DroppableInfo = Seq(Seq("stackTrace"), Seq("messageParameters", "errorClass"))

  /** `status` and `trailers`, shortened as the class says when they are over [[Budget]]. */
  def bound(status: Status, trailers: Metadata): (Status, Metadata) = {
    if (status.isOk || sentSize(status, trailers) <= Budget) return (status, trailers)
    val message = Option(status.getDescription).map(shorten)
    val shortStatus = message.fold(status)(status.withDescription)
    Option(trailers.get(DetailsKey)).map(RpcStatus.parseFrom).foreach { rpc =>
      val first = rpc.toBuilder.setMessage(message.getOrElse(shorten(rpc.getMessage))).build()
      val candidates = DroppableInfo.scanLeft(first)(withoutInfo)
      val fitting = candidates.find { candidate =>
        putDetails(trailers, candidate)
        sentSize(shortStatus, trailers) <= Budget
      }
      putDetails(trailers, fitting.getOrElse(candidates.last))
    }
    (shortStatus, trailers)
  }

  private def putDetails(trailers: Metadata, details: RpcStatus): Unit = {
    trailers.discardAll(DetailsKey)
    trailers.put(DetailsKey, details.toByteArray)
  }

  /** `rpc` without the `ErrorInfo` entries `keys`. */
  private def withoutInfo(rpc: RpcStatus, keys: Seq[String]): RpcStatus = {
    val builder = rpc.toBuilder.clearDetails()
    rpc.getDetailsList.asScala.foreach { detail =>
      if (detail.is(classOf[ErrorInfo])) {
        val info = detail.unpack(classOf[ErrorInfo]).toBuilder
        keys.foreach(info.removeMetadata)
        builder.addDetails(AnyProto.pack(info.build()))
      } else {
        builder.addDetails(detail)
      }
    }
    builder.build()
  }

  /**
   * `message` cut to at most [[MessageBudget]] bytes once percent-encoded as `grpc-message`
   * is, at a character boundary, saying how much was left out.
   */
  private[connect] def shorten(message: String): String = {
    if (encodedSize(message) <= MessageBudget) return message
    val suffix = s" ... (${message.length} characters in all; the whole error is in the " +
      "error details)"
    val room = MessageBudget - encodedSize(suffix)
    var used = 0
    var end = 0
    while (end < message.length && {
        val next = message.offsetByCodePoints(end, 1)
        val size = encodedSize(message.substring(end, next))
        if (used + size <= room) { used += size; end = next; true }
        else false
      }) {}
    message.substring(0, end) + suffix
  }

  /** Bytes of `text` as gRPC percent-encodes a status message (each byte outside ' '..'}'). */
  private def encodedSize(text: String): Int =
    text.getBytes(UTF_8).iterator.map(b => if (b < ' ' || b >= '~' || b == '%') 3 else 1).sum

  /** What the trailers take as sent: names, values (binary ones in base64) and overheads. */
  private[connect] def sentSize(status: Status, trailers: Metadata): Int = {
    val message = Option(status.getDescription).map(encodedSize).getOrElse(0)
    val fixed = "grpc-status".length + 2 + "grpc-message".length + message + 2 * HeaderOverhead
    fixed + trailers.keys().asScala.iterator.map { name =>
      val values: Iterable[Int] =
        if (name.endsWith(Metadata.BINARY_HEADER_SUFFIX)) {
          trailers.getAll(Metadata.Key.of(name, Metadata.BINARY_BYTE_MARSHALLER))
            .asScala.map(v => (v.length + 2) / 3 * 4)
        } else {
          trailers.getAll(Metadata.Key.of(name, Metadata.ASCII_STRING_MARSHALLER))
            .asScala.map(_.length)
        }
      values.iterator.map(_ + name.length + HeaderOverhead).sum
    }.sum
  }
}
