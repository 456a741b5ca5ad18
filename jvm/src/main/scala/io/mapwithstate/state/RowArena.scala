package io.mapwithstate.state

import org.apache.spark.unsafe.Platform

/**
 * Append-only storage for the bytes of one [[RowHashMap]]: a list of byte[] pages that records
 * are bump-allocated from, each record addressed by a packed `Long` (page number and offset).
 *
 * It exists so that millions of small rows cost a few bytes of overhead each instead of a
 * byte[] header and a pointer per row. Written bytes are not overwritten, bar one case: the map
 * hands out UnsafeRow views that point straight into the pages, and those views must stay valid
 * however the map changes afterwards, except that [[StateMap.putInPlace]] may write a state over
 * its key's previous one of the same size. Space freed by other overwrites and by removes is
 * therefore only reclaimed by copying the live records into a new arena (see [[RowHashMap]]) and
 * dropping this one; the old pages live on for as long as a view still refers to them.
 *
 * Pages start small, so that the many short-lived delta layers of a state map stay cheap, and
 * double up to [[RowArena.MaxPageSize]]. That cap is kept below half of G1's smallest region
 * size (1 MB): larger arrays become "humongous" objects, each of which wastes the unused rest of
 * its own region.
 */
private[state] final class RowArena(initialPageSize: Int) {
  import RowArena._

  require(initialPageSize > 0, s"initialPageSize must be positive, got $initialPageSize")

  private var pages = new Array[Array[Byte]](4)
  private var numPages = 0

  /** The page small records are bump-allocated from; -1 before the first allocation. */
  private var currentPageIndex = -1
  private var pageCursor = 0
  private var nextPageSize = math.min(initialPageSize, MaxPageSize)

  /** Bytes handed out by [[allocate]] so far, including bytes whose records are now garbage. */
  private var allocated = 0L

  def allocatedBytes: Long = allocated

  /** Bytes held by pages, including each page's unused tail: what the arena costs the heap. */
  def footprintBytes: Long = {
    var total = 0L
    var i = 0
    while (i < numPages) {
      total += pages(i).length
      i += 1
    }
    total
  }

  /**
   * Reserves `size` contiguous bytes and returns their address. A record never straddles two
   * pages, because an UnsafeRow view needs its bytes in one array; a record larger than a page
   * gets a page of its own.
   */
  def allocate(size: Int): Long = {
    require(size >= 0, s"negative record size $size")
    allocated += size
    if (currentPageIndex < 0 || pages(currentPageIndex).length - pageCursor < size) {
      if (size > nextPageSize) {
        // A dedicated page leaves the current page open for the small records that follow.
        return encode(addPage(new Array[Byte](size)), 0)
      }
      currentPageIndex = addPage(new Array[Byte](nextPageSize))
      pageCursor = 0
      nextPageSize = math.min(nextPageSize.toLong * 2, MaxPageSize.toLong).toInt
    }
    val address = encode(currentPageIndex, pageCursor)
    pageCursor += size
    address
  }

  /** The page an address points into. */
  def page(address: Long): Array[Byte] = pages(pageIndex(address))

  /** The Unsafe offset (for `Platform` and `UnsafeRow.pointTo`) of an address in its page. */
  def unsafeOffset(address: Long): Long = Platform.BYTE_ARRAY_OFFSET + offsetInPage(address)

  private def addPage(page: Array[Byte]): Int = {
    if (numPages == MaxPages) {
      throw new IllegalStateException(s"state map arena is full ($MaxPages pages)")
    }
    if (numPages == pages.length) {
      pages = java.util.Arrays.copyOf(pages, math.min(pages.length * 2, MaxPages))
    }
    pages(numPages) = page
    numPages += 1
    numPages - 1
  }
}

private[state] object RowArena {

  /** Largest page of small records; see the class comment for why it stays below 512 KB. */
  val MaxPageSize: Int = 256 * 1024

  /**
   * Addresses pack `pageIndex + 1` into bits 32..61 and the offset into bits 0..18 (no page
   * is larger than [[MaxPageSize]], and a record larger than that has a page of its own, at
   * offset 0), so that 0 is never a valid address (it marks an empty slot in [[RowHashMap]]),
   * and bits 19..31 and 62..63 are left for the map's per-slot hash tag and flags: decoding
   * ignores them.
   */
  val AddressBits: Long = (1L << 62) - 1
  private val OffsetBits: Long = (1L << 19) - 1
  private val MaxPages = (1 << 30) - 2

  private def encode(pageIndex: Int, offset: Int): Long = ((pageIndex + 1).toLong << 32) | offset

  def pageIndex(address: Long): Int = ((address & AddressBits) >>> 32).toInt - 1

  def offsetInPage(address: Long): Int = (address & OffsetBits).toInt
}
