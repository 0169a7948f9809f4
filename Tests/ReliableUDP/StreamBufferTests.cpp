// ChunkPool, SendBuffer and ReceiveBuffer: directed cases and randomized runs against models.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cstdint>
#include <deque>
#include <new>
#include <random>
#include <set>
#include <vector>

#include "ReliableUDP/Detail/ChunkPool.h"
#include "ReliableUDP/Detail/ReceiveBuffer.h"
#include "ReliableUDP/Detail/SendBuffer.h"
#include "Support/AllocationCounter.h"

using timerwheel::rudp::detail::ChunkPool;
using timerwheel::rudp::detail::ReceiveBuffer;
using timerwheel::rudp::detail::SendBuffer;
using timerwheel::test::FailNthAllocation;

namespace {

constexpr std::size_t kChunk = ChunkPool::kChunkSize;
using Bytes = std::vector<std::uint8_t>;
using InsertResult = ReceiveBuffer::InsertResult;
using ReadResult = ReceiveBuffer::ReadResult;

// The stream byte at `offset`: varies with the offset so a byte read from the wrong place shows.
std::uint8_t PatternByte(std::uint64_t offset) {
  return static_cast<std::uint8_t>((offset * 2654435761u) >> 11);
}

Bytes Pattern(std::uint64_t offset, std::size_t size) {
  Bytes bytes(size);
  for (std::size_t i = 0; i < size; ++i) bytes[i] = PatternByte(offset + i);
  return bytes;
}

Bytes ReadBack(const SendBuffer& buffer, std::uint64_t offset, std::size_t size) {
  Bytes bytes(size);
  buffer.Read(offset, size, bytes.data());
  return bytes;
}

// The chunks needed to hold [begin, end) when chunks are aligned to kChunk.
std::size_t ChunksSpanning(std::uint64_t begin, std::uint64_t end) {
  if (begin == end) return 0;
  return static_cast<std::size_t>((end + kChunk - 1) / kChunk - begin / kChunk);
}

// RFC 9000 section 16 varint in its shortest form, written independently of WireFormat.
void AppendVarInt(Bytes& out, std::uint64_t value, std::size_t forcedLength = 0) {
  std::size_t length = value < 64 ? 1 : value < 16384 ? 2 : value < (1u << 30) ? 4 : 8;
  length = std::max(length, forcedLength);
  const std::uint8_t bits = length == 1 ? 0 : length == 2 ? 1 : length == 4 ? 2 : 3;
  for (std::size_t i = 0; i < length; ++i) {
    out.push_back(static_cast<std::uint8_t>(value >> (8 * (length - 1 - i))));
  }
  out[out.size() - length] |= static_cast<std::uint8_t>(bits << 6);
}

// Appends a framed message (prefix + body) to `stream` and returns the body.
Bytes AppendMessage(Bytes& stream, std::size_t size, std::mt19937_64& rng) {
  Bytes body(size);
  for (auto& b : body) b = static_cast<std::uint8_t>(rng());
  AppendVarInt(stream, size);
  stream.insert(stream.end(), body.begin(), body.end());
  return body;
}

InsertResult InsertBytes(ReceiveBuffer& buffer, const Bytes& stream, std::uint64_t offset,
                         std::size_t size) {
  return buffer.Insert(offset, stream.data() + offset, size);
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// ChunkPool

TEST_CASE("ChunkPool reuses released chunks last in first out", "[rudp][buffers]") {
  ChunkPool pool;
  CHECK(pool.ChunksInUse() == 0);
  CHECK(pool.ChunksAllocated() == 0);
  std::uint8_t* a = pool.Acquire();
  std::uint8_t* b = pool.Acquire();
  std::uint8_t* c = pool.Acquire();
  CHECK(pool.ChunksInUse() == 3);
  CHECK(pool.ChunksAllocated() == 3);
  CHECK(a != b);
  CHECK(b != c);
  a[0] = 1;
  a[kChunk - 1] = 2;  // the whole chunk is usable (ASan would object otherwise)

  pool.Release(b);
  pool.Release(a);
  CHECK(pool.ChunksInUse() == 1);
  CHECK(pool.Acquire() == a);  // the most recently released first
  CHECK(pool.Acquire() == b);
  CHECK(pool.ChunksAllocated() == 3);  // no new chunk while free ones exist
  std::uint8_t* d = pool.Acquire();
  CHECK(pool.ChunksAllocated() == 4);
  CHECK(pool.ChunksInUse() == 4);
  for (std::uint8_t* chunk : {a, b, c, d}) pool.Release(chunk);
  CHECK(pool.ChunksInUse() == 0);
  CHECK(pool.ChunksAllocated() == 4);  // kept at the high-water mark
}

// ---------------------------------------------------------------------------------------------
// SendBuffer

TEST_CASE("SendBuffer appends up to its capacity and reads back across chunks", "[rudp][buffers]") {
  ChunkPool pool;
  {
    constexpr std::size_t kCapacity = 2 * kChunk + 1000;
    SendBuffer buffer(pool, kCapacity);
    CHECK(buffer.FreeSpace() == kCapacity);
    CHECK(pool.ChunksInUse() == 0);  // chunks are taken lazily

    const Bytes data = Pattern(0, kCapacity + 500);
    CHECK(buffer.Append(data.data(), 100) == 100);
    CHECK(pool.ChunksInUse() == 1);
    CHECK(buffer.Append(data.data() + 100, data.size() - 100) == kCapacity - 100);
    CHECK(buffer.FreeSpace() == 0);
    CHECK(buffer.AppendedEnd() == kCapacity);
    CHECK(buffer.Append(data.data(), 10) == 0);
    CHECK(pool.ChunksInUse() == 3);

    CHECK(ReadBack(buffer, 0, kCapacity) == Pattern(0, kCapacity));
    CHECK(ReadBack(buffer, kChunk - 10, 20) == Pattern(kChunk - 10, 20));  // across a boundary
    CHECK(ReadBack(buffer, kChunk - 1, kChunk + 2) == Pattern(kChunk - 1, kChunk + 2));
    CHECK(ReadBack(buffer, kCapacity - 1, 1) == Pattern(kCapacity - 1, 1));

    // Acking frees space and the chunks wholly below the acked prefix.
    SendBuffer::Range range;
    REQUIRE(buffer.NextToSend(kChunk + 10, UINT64_MAX, range));
    buffer.OnSent(range.offset, range.size);
    buffer.OnAcked(0, kChunk + 10);
    CHECK(buffer.AckedPrefix() == kChunk + 10);
    CHECK(buffer.FreeSpace() == kChunk + 10);
    CHECK(pool.ChunksInUse() == 2);
    CHECK(buffer.Append(data.data() + kCapacity, 500) == 500);
    CHECK(ReadBack(buffer, kChunk + 10, kCapacity + 500 - (kChunk + 10)) ==
          Pattern(kChunk + 10, kCapacity + 500 - (kChunk + 10)));
  }
  CHECK(pool.ChunksInUse() == 0);  // the destructor returns its chunks
}

TEST_CASE("SendBuffer NextToSend respects maxSize and the flow-control limit", "[rudp][buffers]") {
  ChunkPool pool;
  SendBuffer buffer(pool, 100000);
  SendBuffer::Range range;
  CHECK_FALSE(buffer.NextToSend(1200, UINT64_MAX, range));  // nothing appended
  const Bytes data = Pattern(0, 10000);
  buffer.Append(data.data(), data.size());

  CHECK_FALSE(buffer.NextToSend(0, UINT64_MAX, range));
  REQUIRE(buffer.NextToSend(1200, 100000, range));
  CHECK(range.offset == 0);
  CHECK(range.size == 1200);
  CHECK_FALSE(range.retransmission);
  CHECK(buffer.NextNewOffset() == 0);  // NextToSend changes nothing
  buffer.OnSent(range.offset, range.size);
  CHECK(buffer.NextNewOffset() == 1200);

  REQUIRE(buffer.NextToSend(1200, 2000, range));
  CHECK(range.offset == 1200);
  CHECK(range.size == 800);  // clipped to the limit
  buffer.OnSent(range.offset, range.size);
  CHECK_FALSE(buffer.NextToSend(1200, 2000, range));
  CHECK_FALSE(buffer.NextToSend(1200, 1000, range));  // a limit below NextNewOffset

  REQUIRE(buffer.NextToSend(100000, 1000000, range));
  CHECK(range.offset == 2000);
  CHECK(range.size == 8000);  // clipped to the appended end
  buffer.OnSent(range.offset, range.size);
  CHECK_FALSE(buffer.NextToSend(1200, UINT64_MAX, range));
  CHECK_FALSE(buffer.AllAcked());
}

TEST_CASE("SendBuffer sends retransmissions first and beyond the flow-control limit",
          "[rudp][buffers]") {
  ChunkPool pool;
  SendBuffer buffer(pool, 100000);
  const Bytes data = Pattern(0, 5000);
  buffer.Append(data.data(), data.size());
  buffer.OnSent(0, 1000);
  buffer.OnSent(1000, 1000);
  buffer.OnSent(2000, 1000);
  buffer.OnAcked(1000, 1000);
  CHECK(buffer.AckedPrefix() == 0);
  CHECK_FALSE(buffer.HasRetransmissions());

  buffer.OnLost(0, 3000);  // the acked middle is not queued
  CHECK(buffer.HasRetransmissions());
  SendBuffer::Range range;
  REQUIRE(buffer.NextToSend(600, 0, range));  // a flow-control limit of 0 does not stop it
  CHECK(range.offset == 0);
  CHECK(range.size == 600);
  CHECK(range.retransmission);
  buffer.OnSent(range.offset, range.size);
  REQUIRE(buffer.NextToSend(5000, 0, range));
  CHECK(range.offset == 600);
  CHECK(range.size == 400);
  CHECK(range.retransmission);
  buffer.OnSent(range.offset, range.size);
  REQUIRE(buffer.NextToSend(5000, 0, range));
  CHECK(range.offset == 2000);
  CHECK(range.size == 1000);
  CHECK(range.retransmission);
  buffer.OnSent(range.offset, range.size);
  CHECK_FALSE(buffer.HasRetransmissions());
  CHECK_FALSE(buffer.NextToSend(5000, 3000, range));
  REQUIRE(buffer.NextToSend(5000, 3500, range));
  CHECK(range.offset == 3000);
  CHECK_FALSE(range.retransmission);

  SECTION("an ack removes queued bytes and extends the acked prefix") {
    buffer.OnLost(0, 3000);
    buffer.OnAcked(0, 1500);
    CHECK(buffer.AckedPrefix() == 2000);  // joined with the earlier ack of 1000..2000
    REQUIRE(buffer.NextToSend(5000, 0, range));
    CHECK(range.offset == 2000);
    CHECK(range.size == 1000);
    buffer.OnAcked(2000, 1000);
    CHECK_FALSE(buffer.HasRetransmissions());
    CHECK(buffer.AckedPrefix() == 3000);
  }
  SECTION("acks and losses below the acked prefix are harmless") {
    buffer.OnAcked(0, 3000);
    CHECK(buffer.AckedPrefix() == 3000);
    buffer.OnAcked(0, 3000);
    buffer.OnAcked(500, 10);
    buffer.OnLost(0, 3000);
    CHECK_FALSE(buffer.HasRetransmissions());
    CHECK(buffer.AckedPrefix() == 3000);
    buffer.OnSent(3000, 2000);
    buffer.OnLost(2000, 2000);  // partly below the prefix: only 3000..4000 is queued
    REQUIRE(buffer.NextToSend(5000, 0, range));
    CHECK(range.offset == 3000);
    CHECK(range.size == 1000);
    buffer.OnAcked(2500, 2500);  // also partly below
    CHECK(buffer.AllAcked());
    CHECK_FALSE(buffer.HasRetransmissions());
    CHECK(pool.ChunksInUse() == 0);  // idle: no chunk kept
  }
}

TEST_CASE("SendBuffer QueueOldestForProbe queues the lowest unacked bytes", "[rudp][buffers]") {
  ChunkPool pool;
  SendBuffer buffer(pool, 100000);
  CHECK_FALSE(buffer.QueueOldestForProbe(1000));  // nothing sent
  const Bytes data = Pattern(0, 5000);
  buffer.Append(data.data(), data.size());
  CHECK_FALSE(buffer.QueueOldestForProbe(1000));  // appended but not sent
  buffer.OnSent(0, 3000);
  buffer.OnAcked(500, 500);
  buffer.OnAcked(1200, 100);

  REQUIRE(buffer.QueueOldestForProbe(1000));
  SendBuffer::Range range;
  REQUIRE(buffer.NextToSend(5000, 0, range));
  CHECK(range.offset == 0);
  CHECK(range.size == 500);
  CHECK(range.retransmission);
  buffer.OnSent(range.offset, range.size);
  REQUIRE(buffer.NextToSend(5000, 0, range));
  CHECK(range.offset == 1000);
  CHECK(range.size == 200);  // then 1300..1600: 1000 bytes in all, skipping the acked ones
  buffer.OnSent(range.offset, range.size);
  REQUIRE(buffer.NextToSend(5000, 0, range));
  CHECK(range.offset == 1300);
  CHECK(range.size == 300);
  buffer.OnSent(range.offset, range.size);
  CHECK_FALSE(buffer.HasRetransmissions());

  buffer.OnLost(2000, 1000);
  REQUIRE(buffer.QueueOldestForProbe(100));  // something is queued already: nothing added
  REQUIRE(buffer.NextToSend(5000, 0, range));
  CHECK(range.offset == 2000);
  CHECK(range.size == 1000);
  buffer.OnSent(range.offset, range.size);

  buffer.OnAcked(0, 3000);
  CHECK(buffer.AckedPrefix() == 3000);
  CHECK_FALSE(buffer.QueueOldestForProbe(1000));  // every sent byte is acked
  CHECK_FALSE(buffer.HasRetransmissions());
}

TEST_CASE("SendBuffer matches a byte model under random sends acks and losses", "[rudp][buffers]") {
  const auto seed = GENERATE(1u, 2u, 3u);
  CAPTURE(seed);
  std::mt19937_64 rng(seed);
  const auto random = [&rng](std::uint64_t lo, std::uint64_t hi) {  // inclusive
    return std::uniform_int_distribution<std::uint64_t>(lo, hi)(rng);
  };
  constexpr std::size_t kCapacity = 3 * kChunk + 777;
  constexpr std::uint64_t kTotal = 600000;

  ChunkPool pool;
  SendBuffer buffer(pool, kCapacity);
  struct Packet {
    std::uint64_t offset;
    std::size_t size;
  };
  std::vector<Packet> inFlight, lost, acked;
  std::vector<bool> modelAcked(kTotal, false);
  std::set<std::uint64_t> modelQueued;  // bytes declared lost, not acked nor resent since
  std::uint64_t modelPrefix = 0, modelEnd = 0, modelNextNew = 0;
  std::uint64_t flowLimit = 20000;

  const auto take = [&](std::vector<Packet>& packets) {
    const auto i = static_cast<std::size_t>(random(0, packets.size() - 1));
    const Packet packet = packets[i];
    packets[i] = packets.back();
    packets.pop_back();
    return packet;
  };
  const auto ack = [&](const Packet& packet) {
    buffer.OnAcked(packet.offset, packet.size);
    for (std::uint64_t b = packet.offset; b < packet.offset + packet.size; ++b) {
      modelAcked[b] = true;
      modelQueued.erase(b);
    }
    while (modelPrefix < modelNextNew && modelAcked[modelPrefix]) ++modelPrefix;
  };
  const auto send = [&](std::size_t maxSize, std::uint64_t limit) {
    SendBuffer::Range range;
    const bool got = buffer.NextToSend(maxSize, limit, range);
    if (!modelQueued.empty()) {
      // The lowest queued run, up to maxSize.
      REQUIRE(got);
      CHECK(range.retransmission);
      REQUIRE(range.offset == *modelQueued.begin());
      std::size_t run = 0;
      for (auto it = modelQueued.begin(); it != modelQueued.end() && run < maxSize; ++it, ++run) {
        if (*it != range.offset + run) break;
      }
      REQUIRE(range.size == run);
      for (std::size_t i = 0; i < range.size; ++i) modelQueued.erase(range.offset + i);
    } else {
      const std::uint64_t end = std::min({modelEnd, limit, modelNextNew + maxSize});
      REQUIRE(got == (end > modelNextNew));
      if (!got) return;
      CHECK_FALSE(range.retransmission);
      REQUIRE(range.offset == modelNextNew);
      REQUIRE(range.size == end - modelNextNew);
      modelNextNew = end;
    }
    REQUIRE(ReadBack(buffer, range.offset, range.size) == Pattern(range.offset, range.size));
    buffer.OnSent(range.offset, range.size);
    inFlight.push_back({range.offset, range.size});
  };

  for (int step = 0; step < 20000 && modelEnd < kTotal; ++step) {
    const auto op = random(0, 99);
    if (op < 20) {
      const auto size =
          static_cast<std::size_t>(std::min<std::uint64_t>(random(0, 6000), kTotal - modelEnd));
      const Bytes data = Pattern(modelEnd, size);
      const std::size_t expected =
          std::min<std::size_t>(size, kCapacity - (modelEnd - modelPrefix));
      REQUIRE(buffer.FreeSpace() == kCapacity - (modelEnd - modelPrefix));
      REQUIRE(buffer.Append(data.data(), size) == expected);
      modelEnd += expected;
    } else if (op < 50) {
      if (random(0, 9) == 0) flowLimit += random(0, 30000);
      send(static_cast<std::size_t>(random(1, 3000)), flowLimit);
    } else if (op < 75 && !inFlight.empty()) {
      const Packet packet = take(inFlight);
      ack(packet);
      acked.push_back(packet);
    } else if (op < 88 && !inFlight.empty()) {
      const Packet packet = take(inFlight);
      buffer.OnLost(packet.offset, packet.size);
      for (std::uint64_t b = std::max(packet.offset, modelPrefix); b < packet.offset + packet.size;
           ++b) {
        if (!modelAcked[b]) modelQueued.insert(b);
      }
      lost.push_back(packet);
    } else if (op < 92 && !lost.empty()) {
      ack(take(lost));  // a late ack of a packet declared lost
    } else if (op < 94 && !acked.empty()) {
      ack(acked[static_cast<std::size_t>(random(0, acked.size() - 1))]);  // a duplicate ack
    } else if (op < 97) {
      const auto maxSize = static_cast<std::size_t>(random(1, 3000));
      const bool wasQueued = !modelQueued.empty();
      const bool result = buffer.QueueOldestForProbe(maxSize);
      if (wasQueued) {
        REQUIRE(result);
      } else {
        REQUIRE(result == (modelPrefix < modelNextNew));
        std::size_t queued = 0;
        for (std::uint64_t b = modelPrefix; b < modelNextNew && queued < maxSize; ++b) {
          if (!modelAcked[b]) {
            modelQueued.insert(b);
            ++queued;
          }
        }
      }
    }
    if (acked.size() > 1000) acked.erase(acked.begin(), acked.begin() + 500);

    REQUIRE(buffer.AckedPrefix() == modelPrefix);
    REQUIRE(buffer.NextNewOffset() == modelNextNew);
    REQUIRE(buffer.AppendedEnd() == modelEnd);
    REQUIRE(buffer.HasRetransmissions() == !modelQueued.empty());
    // A chunk is kept exactly while it holds an unacked byte.
    REQUIRE(pool.ChunksInUse() == ChunksSpanning(modelPrefix, modelEnd));
  }
  CHECK(modelEnd == kTotal);  // the run made progress through the whole stream

  // Drain: ack everything in flight, then send and ack the rest without loss.
  while (!inFlight.empty()) ack(take(inFlight));
  for (int guard = 0; guard < 100000 && !buffer.AllAcked(); ++guard) {
    send(4000, UINT64_MAX);
    while (!inFlight.empty()) ack(take(inFlight));
  }
  CHECK(buffer.AllAcked());
  CHECK(modelPrefix == kTotal);
  CHECK(std::all_of(modelAcked.begin(), modelAcked.end(), [](bool b) { return b; }));
  CHECK_FALSE(buffer.HasRetransmissions());
  CHECK(pool.ChunksInUse() == 0);
  CHECK(pool.ChunksAllocated() <= kCapacity / kChunk + 2);
}

// ---------------------------------------------------------------------------------------------
// ReceiveBuffer

TEST_CASE("ReceiveBuffer delivers messages inserted in order", "[rudp][buffers]") {
  ChunkPool pool;
  std::mt19937_64 rng(7);
  Bytes stream;
  std::vector<Bytes> messages;
  for (std::size_t size : {0u, 1u, 63u, 64u, 1000u, 16383u, 16384u, 40000u, 0u, 5u}) {
    messages.push_back(AppendMessage(stream, size, rng));
  }
  {
    ReceiveBuffer buffer(pool, 50000, 40000);
    std::size_t next = 0;
    std::uint64_t offset = 0;
    Bytes out{1, 2, 3};
    while (offset < stream.size()) {
      const auto size =
          std::min<std::uint64_t>({std::uniform_int_distribution<std::uint64_t>(1, 5000)(rng),
                                   stream.size() - offset, buffer.Limit() - offset});
      REQUIRE(InsertBytes(buffer, stream, offset, static_cast<std::size_t>(size)) ==
              InsertResult::Ok);
      offset += size;
      CHECK(buffer.ContiguousEnd() == offset);
      CHECK(buffer.HighestReceived() == offset);
      ReadResult result;
      while ((result = buffer.ReadMessage(out)) == ReadResult::Message) {
        REQUIRE(next < messages.size());
        REQUIRE(out == messages[next]);
        ++next;
      }
      REQUIRE(result == ReadResult::NeedMore);
    }
    CHECK(next == messages.size());
    CHECK(buffer.ConsumedOffset() == stream.size());
    CHECK(pool.ChunksInUse() == 0);  // idle: everything consumed, no chunk kept
  }
  CHECK(pool.ChunksInUse() == 0);
}

TEST_CASE("ReceiveBuffer reassembles random messages from reordered duplicated pieces",
          "[rudp][buffers]") {
  const auto seed = GENERATE(11u, 22u, 33u, 44u);
  CAPTURE(seed);
  std::mt19937_64 rng(seed);
  const auto random = [&rng](std::uint64_t lo, std::uint64_t hi) {  // inclusive
    return std::uniform_int_distribution<std::uint64_t>(lo, hi)(rng);
  };
  constexpr std::size_t kMaxMessage = 100000;
  Bytes stream;
  std::deque<Bytes> expected;
  while (stream.size() < 1500000) {
    const auto kind = random(0, 9);
    const auto size = static_cast<std::size_t>(kind < 5   ? random(0, 100)
                                               : kind < 8 ? random(0, 5000)
                                                          : random(0, kMaxMessage));
    expected.push_back(AppendMessage(stream, size, rng));
  }
  const std::size_t messageCount = expected.size();

  ChunkPool pool;
  {
    const auto window = static_cast<std::size_t>(kMaxMessage + 8 + random(0, 50000));
    ReceiveBuffer buffer(pool, window, kMaxMessage, 16);
    Bytes out;
    std::size_t delivered = 0;
    std::size_t tooFragmented = 0;
    std::uint64_t lastContiguous = 0;
    for (int step = 0; step < 1000000 && buffer.ConsumedOffset() < stream.size(); ++step) {
      // A piece near the contiguous end a third of the time (so the stream advances), else
      // anywhere from a little below the consumed offset up to the limit.
      const std::uint64_t top = std::min<std::uint64_t>(stream.size(), buffer.Limit());
      const std::uint64_t low =
          buffer.ConsumedOffset() - std::min<std::uint64_t>(buffer.ConsumedOffset(), 3000);
      std::uint64_t offset;
      if (random(0, 2) == 0) {
        const std::uint64_t back = std::min<std::uint64_t>(buffer.ContiguousEnd(), 1500);
        offset = buffer.ContiguousEnd() - random(0, back);
      } else {
        offset = random(low, top - 1);
      }
      offset = std::min(offset, top - 1);
      const std::uint64_t maxPiece = random(0, 1) == 0 ? 3000 : 100;  // small ones fragment
      const auto size =
          static_cast<std::size_t>(std::min<std::uint64_t>(random(1, maxPiece), top - offset));
      const InsertResult result = InsertBytes(buffer, stream, offset, size);
      REQUIRE(result != InsertResult::BeyondWindow);
      if (result == InsertResult::TooFragmented) ++tooFragmented;
      REQUIRE(buffer.ContiguousEnd() >= lastContiguous);
      lastContiguous = buffer.ContiguousEnd();
      REQUIRE(buffer.HighestReceived() >= buffer.ContiguousEnd());
      REQUIRE(buffer.HighestReceived() <= buffer.Limit());

      ReadResult read;
      while ((read = buffer.ReadMessage(out)) == ReadResult::Message) {
        REQUIRE(!expected.empty());
        REQUIRE(out == expected.front());
        expected.pop_front();
        ++delivered;
      }
      REQUIRE(read == ReadResult::NeedMore);
      // Chunks are bounded by the window (plus one partly consumed chunk).
      REQUIRE(pool.ChunksInUse() <= window / kChunk + 2);
    }
    CHECK(delivered == messageCount);
    CHECK(expected.empty());
    CHECK(buffer.ConsumedOffset() == stream.size());
    CHECK(buffer.ReadMessage(out) == ReadResult::NeedMore);
    CHECK(pool.ChunksInUse() == 0);
    CHECK(tooFragmented > 0);  // the bound was exercised, and the stream still completed
  }
  CHECK(pool.ChunksInUse() == 0);
}

TEST_CASE("ReceiveBuffer rejects bytes beyond its window and stores none", "[rudp][buffers]") {
  ChunkPool pool;
  ReceiveBuffer buffer(pool, 1008, 1000);
  CHECK(buffer.Limit() == 1008);
  const Bytes stream = Pattern(0, 5000);
  CHECK(InsertBytes(buffer, stream, 500, 600) == InsertResult::BeyondWindow);
  CHECK(InsertBytes(buffer, stream, 1008, 1) == InsertResult::BeyondWindow);
  CHECK(buffer.HighestReceived() == 0);
  CHECK(pool.ChunksInUse() == 0);
  CHECK(InsertBytes(buffer, stream, 1007, 1) == InsertResult::Ok);
  CHECK(buffer.HighestReceived() == 1008);
  CHECK(buffer.ContiguousEnd() == 0);
  CHECK(pool.ChunksInUse() == 1);
}

TEST_CASE("ReceiveBuffer bounds its out-of-order ranges", "[rudp][buffers]") {
  ChunkPool pool;
  ReceiveBuffer buffer(pool, 1008, 1000, 4);
  Bytes stream;
  AppendVarInt(stream, 100);
  for (int i = 0; i < 100; ++i) stream.push_back(static_cast<std::uint8_t>(i));
  for (std::uint64_t offset : {10u, 20u, 30u, 40u}) {
    CHECK(InsertBytes(buffer, stream, offset, 2) == InsertResult::Ok);
  }
  CHECK(InsertBytes(buffer, stream, 50, 2) == InsertResult::TooFragmented);  // a 5th range
  CHECK(InsertBytes(buffer, stream, 5, 2) == InsertResult::TooFragmented);
  CHECK(buffer.HighestReceived() == 42);  // nothing of the rejected pieces was recorded
  CHECK(InsertBytes(buffer, stream, 42, 3) == InsertResult::Ok);   // adjacent: merges
  CHECK(InsertBytes(buffer, stream, 12, 18) == InsertResult::Ok);  // joins 10, 20 and 30
  CHECK(InsertBytes(buffer, stream, 50, 2) == InsertResult::Ok);   // room again
  CHECK(InsertBytes(buffer, stream, 60, 2) == InsertResult::Ok);
  CHECK(InsertBytes(buffer, stream, 70, 2) == InsertResult::TooFragmented);
  CHECK(InsertBytes(buffer, stream, 0, 3) == InsertResult::Ok);  // extends the contiguous part
  CHECK(buffer.ContiguousEnd() == 3);
  CHECK(InsertBytes(buffer, stream, 70, 2) == InsertResult::TooFragmented);
  CHECK(InsertBytes(buffer, stream, 3, 7) == InsertResult::Ok);  // fills the first gap
  CHECK(buffer.ContiguousEnd() == 32);
  CHECK(InsertBytes(buffer, stream, 70, 2) == InsertResult::Ok);
  CHECK(InsertBytes(buffer, stream, 0, stream.size()) == InsertResult::Ok);
  CHECK(buffer.ContiguousEnd() == stream.size());
  Bytes out;
  REQUIRE(buffer.ReadMessage(out) == ReadResult::Message);
  CHECK(out == Bytes(stream.begin() + 2, stream.end()));
  CHECK(pool.ChunksInUse() == 0);
}

// Out-of-order data may never become contiguous (a hostile peer never sends the gaps) and, once
// acknowledged, can never be discarded: it may bring the pool to half the endpoint budget only,
// so that in-order data, which may use all of it, always finds room.
TEST_CASE(
    "ReceiveBuffer stores out-of-order data within half the endpoint budget, in-order "
    "data within all of it",
    "[rudp][buffers][memory]") {
  constexpr std::size_t kSmallChunk = 1024;
  ChunkPool pool(kSmallChunk);
  constexpr std::size_t kEndpointBudget = 8 * kSmallChunk;
  ReceiveBuffer scattered(pool, 20000, 10000, ReceiveBuffer::kDefaultMaxOutOfOrderRanges,
                          ReceiveBuffer::kUnlimited, kEndpointBudget);
  ReceiveBuffer inOrder(pool, 20000, 10000, ReceiveBuffer::kDefaultMaxOutOfOrderRanges,
                        ReceiveBuffer::kUnlimited, kEndpointBudget);
  CHECK(scattered.OutOfOrderEndpointBudget() == kEndpointBudget / 2);
  const Bytes stream = Pattern(0, 20000);
  for (std::uint64_t i = 0; i < 4; ++i) {
    CHECK(InsertBytes(scattered, stream, 1 + i * kSmallChunk, 1) == InsertResult::Ok);
  }
  CHECK(pool.BytesInUse() == kEndpointBudget / 2);
  CHECK(InsertBytes(scattered, stream, 1 + 4 * kSmallChunk, 1) == InsertResult::OverBudget);
  CHECK(InsertBytes(inOrder, stream, 5000, 1) == InsertResult::OverBudget);  // any buffer's
  CHECK(InsertBytes(scattered, stream, 2, 10) == InsertResult::Ok);          // in a chunk it holds
  CHECK(scattered.HighestReceived() == 1 + 3 * kSmallChunk + 1);

  // In-order data takes the other half, then nothing more.
  Bytes message;
  AppendVarInt(message, 4 * kSmallChunk - 2);
  message.resize(4 * kSmallChunk, 0x5a);
  CHECK(InsertBytes(inOrder, message, 0, message.size()) == InsertResult::Ok);
  CHECK(pool.BytesInUse() == kEndpointBudget);
  CHECK(InsertBytes(inOrder, stream, message.size(), 1) == InsertResult::OverBudget);
  CHECK(InsertBytes(scattered, stream, 0, 1) == InsertResult::Ok);  // its gap: no new chunk
  CHECK(scattered.ContiguousEnd() == 12);

  // Read out, the in-order data's chunks serve out-of-order data again, up to the share only.
  Bytes out;
  REQUIRE(inOrder.ReadMessage(out) == ReadResult::Message);
  CHECK(pool.BytesInUse() == kEndpointBudget / 2);
  CHECK(InsertBytes(scattered, stream, 1 + 5 * kSmallChunk, 1) == InsertResult::OverBudget);
  CHECK(InsertBytes(scattered, stream, 12, kSmallChunk) == InsertResult::Ok);  // in order
  CHECK(pool.BytesInUse() == kEndpointBudget / 2);  // the chunks it fills are held already
  CHECK(InsertBytes(inOrder, stream, message.size(), 2 * kSmallChunk) == InsertResult::Ok);
  CHECK(pool.BytesInUse() == kEndpointBudget / 2 + 2 * kSmallChunk);
}

TEST_CASE("ReceiveBuffer keeps the first copy of each byte", "[rudp][buffers]") {
  ChunkPool pool;
  ReceiveBuffer buffer(pool, 1008, 1000);
  Bytes stream;
  AppendVarInt(stream, 10);
  for (int i = 0; i < 10; ++i) stream.push_back(static_cast<std::uint8_t>(i));
  const Bytes other(stream.size(), 0xee);
  CHECK(buffer.Insert(5, other.data(), 3) == InsertResult::Ok);
  CHECK(InsertBytes(buffer, stream, 0, stream.size()) == InsertResult::Ok);
  CHECK(buffer.Insert(0, other.data(), other.size()) == InsertResult::Ok);  // a duplicate
  Bytes out;
  REQUIRE(buffer.ReadMessage(out) == ReadResult::Message);
  Bytes expected(stream.begin() + 1, stream.end());
  expected[4] = expected[5] = expected[6] = 0xee;  // offsets 5..7
  CHECK(out == expected);
  CHECK(buffer.Insert(3, other.data(), 5) == InsertResult::Ok);  // below the consumed offset
  CHECK(buffer.ConsumedOffset() == stream.size());
  CHECK(pool.ChunksInUse() == 0);
}

TEST_CASE("ReceiveBuffer reports a message larger than the maximum", "[rudp][buffers]") {
  ChunkPool pool;
  ReceiveBuffer buffer(pool, 1008, 100);
  Bytes out;

  SECTION("just over the limit") {
    Bytes stream;
    AppendVarInt(stream, 101);
    REQUIRE(InsertBytes(buffer, stream, 0, stream.size()) == InsertResult::Ok);
    CHECK(buffer.ReadMessage(out) == ReadResult::MessageTooLarge);
  }
  SECTION("an 8-byte prefix") {
    Bytes stream;
    AppendVarInt(stream, std::uint64_t{1} << 61);
    REQUIRE(stream.size() == 8);
    REQUIRE(InsertBytes(buffer, stream, 0, stream.size()) == InsertResult::Ok);
    CHECK(buffer.ReadMessage(out) == ReadResult::MessageTooLarge);
  }
  SECTION("exactly the limit is fine, with a prefix longer than needed") {
    Bytes stream;
    AppendVarInt(stream, 100, 8);
    stream.resize(stream.size() + 100, 0x5a);
    REQUIRE(InsertBytes(buffer, stream, 0, 7) == InsertResult::Ok);
    CHECK(buffer.ReadMessage(out) == ReadResult::NeedMore);  // an incomplete prefix
    REQUIRE(InsertBytes(buffer, stream, 7, 50) == InsertResult::Ok);
    CHECK(buffer.ReadMessage(out) == ReadResult::NeedMore);  // an incomplete body
    REQUIRE(InsertBytes(buffer, stream, 57, stream.size() - 57) == InsertResult::Ok);
    REQUIRE(buffer.ReadMessage(out) == ReadResult::Message);
    CHECK(out == Bytes(100, 0x5a));
  }
}

TEST_CASE("ReceiveBuffer reads a length prefix that straddles a chunk boundary",
          "[rudp][buffers]") {
  std::mt19937_64 rng(99);
  Bytes stream;
  const Bytes first = AppendMessage(stream, kChunk - 4, rng);  // 2-byte prefix
  REQUIRE(stream.size() == kChunk - 2);
  const Bytes second = AppendMessage(stream, 70000, rng);  // 4-byte prefix over the boundary
  const Bytes third = AppendMessage(stream, 0, rng);
  const Bytes fourth = AppendMessage(stream, 3, rng);

  ChunkPool pool;
  ReceiveBuffer buffer(pool, 100000, 90000);
  Bytes out;
  SECTION("in order") {
    REQUIRE(InsertBytes(buffer, stream, 0, kChunk) == InsertResult::Ok);  // half the prefix
    REQUIRE(buffer.ReadMessage(out) == ReadResult::Message);
    CHECK(out == first);
    CHECK(buffer.ReadMessage(out) == ReadResult::NeedMore);
    REQUIRE(InsertBytes(buffer, stream, kChunk, stream.size() - kChunk) == InsertResult::Ok);
  }
  SECTION("backwards in pieces") {
    for (std::uint64_t end = stream.size(); end > 0;) {
      const std::uint64_t begin = end > 1000 ? end - 1000 : 0;
      REQUIRE(InsertBytes(buffer, stream, begin, static_cast<std::size_t>(end - begin)) ==
              InsertResult::Ok);
      end = begin;
    }
    REQUIRE(buffer.ReadMessage(out) == ReadResult::Message);
    CHECK(out == first);
  }
  REQUIRE(buffer.ReadMessage(out) == ReadResult::Message);
  CHECK(out == second);
  const std::size_t capacity = out.capacity();
  REQUIRE(buffer.ReadMessage(out) == ReadResult::Message);
  CHECK(out.empty());  // a zero-length message
  CHECK(out == third);
  REQUIRE(buffer.ReadMessage(out) == ReadResult::Message);
  CHECK(out == fourth);
  CHECK(out.capacity() == capacity);  // reused, not reallocated
  CHECK(buffer.ReadMessage(out) == ReadResult::NeedMore);
  CHECK(pool.ChunksInUse() == 0);
}

// An append that cannot get a chunk (no memory), after the buffer went idle one byte short of a
// chunk's end (every chunk freed, the next byte mid-chunk): each allocation the append makes is
// failed in turn. Append reports the byte it copied before the boundary (a caller that took it for
// nothing would copy it again); AppendWhole, for a message's length prefix, takes back what it
// copied and throws, so the prefix is never split.
TEST_CASE("SendBuffer appends that cannot get a chunk copy nothing twice and split no prefix",
          "[rudp][buffers][allocation-failure]") {
  const Bytes first = Pattern(0, kChunk - 1);
  const Bytes next = Pattern(kChunk - 1, 100);
  for (const bool whole : {false, true}) {
    CAPTURE(whole);
    std::size_t failures = 0;
    for (std::size_t n = 1;; ++n) {
      CAPTURE(n);
      REQUIRE(n <= 10);
      ChunkPool pool;
      SendBuffer buffer(pool, 1 << 20);
      REQUIRE(buffer.Append(first.data(), first.size()) == first.size());
      buffer.OnSent(0, first.size());
      buffer.OnAcked(0, first.size());
      std::size_t appended = 0;
      bool threw = false, failed = false;
      {
        FailNthAllocation failure(n);
        try {
          if (whole) {
            buffer.AppendWhole(next.data(), 2);
            appended = 2;
          } else {
            appended = buffer.Append(next.data(), next.size());
          }
        } catch (const std::bad_alloc&) {
          threw = true;
        }
        failed = failure.Failed();
      }
      CHECK(buffer.AppendedEnd() == first.size() + appended);
      if (whole) {
        CHECK(threw == failed);
        CHECK(appended == (failed ? 0 : 2));
      } else if (failed) {
        // The chunk holding the first byte came from the pool's free list (the acked one); the
        // failure is the next chunk's: the byte before the boundary was copied.
        CHECK(!threw);
        CHECK(appended == 1);
      }
      // What was appended reads back, and the rest goes in after it, once, in order.
      const std::size_t total = whole ? 2 : next.size();
      if (appended < total) {
        REQUIRE(buffer.Append(next.data() + appended, total - appended) == total - appended);
      }
      Bytes out(total);
      buffer.Read(first.size(), total, out.data());
      CHECK(out == Bytes(next.begin(), next.begin() + static_cast<std::ptrdiff_t>(total)));
      if (!failed) break;  // n is past the last allocation the append makes
      ++failures;
    }
    CHECK(failures > 0);
  }
}
