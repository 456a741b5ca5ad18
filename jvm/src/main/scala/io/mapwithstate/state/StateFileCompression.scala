package io.mapwithstate.state

import java.io.{
  BufferedInputStream,
  ByteArrayOutputStream,
  DataInputStream,
  DataOutputStream,
  EOFException,
  InputStream,
  IOException,
  OutputStream
}
import java.nio.charset.StandardCharsets
import java.util.zip.CRC32

import scala.util.control.NonFatal

import org.apache.spark.{SparkConf, SparkEnv}
import org.apache.spark.io.CompressionCodec
import org.apache.spark.sql.mapwithstate.StreamingQueryGlue

/**
 * The compressed form of a state file: a small self-checking header naming the codec, then the
 * [[StateMapSerde]] stream compressed with it. Spark's HDFS-backed store compresses its delta
 * and snapshot files with `spark.sql.streaming.stateStore.compression.codec` (LZ4 by default),
 * and so do we, with the same setting and Spark's codecs.
 *
 * Why: a record of a small state is mostly zero bytes and repeated lengths and times, so state
 * files compress about sevenfold. The uncompressed file costs more to hand to the kernel and
 * to fsync than LZ4 costs to compress it, and on a remote file system (HDFS, an object store)
 * every byte is network and storage.
 *
 * Unlike Spark's files, ours name their codec, so that a file reads back whatever the setting
 * is when it is read (the setting may change between runs of a query, and the state reader
 * knows no setting at all), and files written uncompressed by earlier versions, which begin
 * with the state format's own magic number, still read as they are. The header is
 * {{{
 *   int magic "MWSZ", unsigned short name length, the codec's name (UTF-8), int CRC32 of these
 * }}}
 * so that damage to it is reported as such rather than as an unknown codec; damage to the
 * compressed bytes is caught by the codec's own checksums (LZ4's, ZSTD's) or by the state
 * format's CRCs inside.
 */
private[state] object StateFileCompression {
  val Magic: Int = 0x4d57535a // "MWSZ"

  /** A codec name longer than this is damage, not a name. */
  private val MaxNameBytes = 256

  /** Spark's codec for a name, as the HDFS-backed store makes it; the error names the setting. */
  def codec(name: String): CompressionCodec =
    try sparkCodec(name)
    catch {
      case NonFatal(e) =>
        throw new IllegalArgumentException(
          "spark.sql.streaming.stateStore.compression.codec is " +
            s"'$name', which is not a compression codec Spark has (lz4, lzf, snappy, zstd or a " +
            s"CompressionCodec class): ${e.getMessage}", e)
    }

  private def sparkCodec(name: String): CompressionCodec = StreamingQueryGlue.compressionCodec(
    Option(SparkEnv.get).map(_.conf).getOrElse(new SparkConf(false)), name)

  /**
   * `out` with the header written for `name`, compressing what is written to the result.
   * Closing the result finishes the compressed stream and closes `out`.
   */
  def compressing(out: OutputStream, name: String, codec: CompressionCodec): OutputStream = {
    out.write(headerBytes(name))
    codec.compressedOutputStream(out)
  }

  /**
   * The state stream of a file read from `in`: decompressed with the codec its header names,
   * or `in` itself for a file without that header (written uncompressed). `in` must support
   * mark and reset.
   */
  def decompressing(in: BufferedInputStream): InputStream = {
    in.mark(4)
    val data = new DataInputStream(in)
    val magic =
      try data.readInt()
      catch { case _: EOFException => Magic - 1 }
    if (magic != Magic) {
      in.reset()
      return in
    }
    val name =
      try {
        val nameLength = data.readUnsignedShort()
        if (nameLength == 0 || nameLength > MaxNameBytes) {
          throw new IOException(s"is corrupt: its compression header gives a codec name of " +
            s"$nameLength bytes")
        }
        val nameBytes = new Array[Byte](nameLength)
        data.readFully(nameBytes)
        val name = new String(nameBytes, StandardCharsets.UTF_8)
        if (checksum(name) != data.readInt()) {
          throw new IOException("is corrupt: its compression header fails its checksum")
        }
        name
      } catch {
        case _: EOFException =>
          throw new IOException("is truncated: its compression header ends early")
      }
    val codec =
      try sparkCodec(name)
      catch {
        case NonFatal(e) => throw new IOException(
            s"is compressed with '$name', a codec this Spark cannot make: ${e.getMessage}", e)
      }
    codec.compressedInputStream(in)
  }

  private def headerBytes(name: String): Array[Byte] = {
    val bytes = new ByteArrayOutputStream()
    val data = new DataOutputStream(bytes)
    val nameBytes = name.getBytes(StandardCharsets.UTF_8)
    require(nameBytes.length > 0 && nameBytes.length <= MaxNameBytes,
      s"a compression codec name of ${nameBytes.length} bytes")
    data.writeInt(Magic)
    data.writeShort(nameBytes.length)
    data.write(nameBytes)
    data.writeInt(checksum(name))
    data.flush()
    bytes.toByteArray
  }

  /** The CRC32 of the magic number, the name's length and the name, as written. */
  private def checksum(name: String): Int = {
    val nameBytes = name.getBytes(StandardCharsets.UTF_8)
    val crc = new CRC32
    crc.update(Array[Byte](0x4d, 0x57, 0x53, 0x5a,
        (nameBytes.length >>> 8).toByte, nameBytes.length.toByte))
    crc.update(nameBytes)
    crc.getValue.toInt
  }
}
