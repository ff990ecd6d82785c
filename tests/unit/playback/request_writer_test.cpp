#include "playback/request_writer.hpp"

#include <functional>
#include <string>
#include <vector>

#include <catch2/catch.hpp>
#include <simdjson.h>

#include "wandura/error.hpp"

using wandura::intent;
using wandura::ticket_batch;
using wandura::detail::write_ticket_batch;

namespace {

ticket_batch sample_batch() {
  return ticket_batch{{{"the-heiress-returns", 4, intent::play},
                       {"the-heiress-returns", 5, intent::prefetch},
                       {"the-heiress-returns", 6, intent::prefetch}},
                      "device-1",
                      "kek-1",
                      "k3Jd9sQm2vXa7LpT0bWc1e:Zr8uYq2nM4a"};
}

/// Reads a written body back with simdjson (DOM, an independent path from the writer) into a ticket_batch.
ticket_batch read_back(std::string const& json) {
  simdjson::dom::parser parser;
  simdjson::dom::element doc = parser.parse(json);
  ticket_batch out;
  for (simdjson::dom::element e : doc["episodes"].get_array()) {
    wandura::episode_request r;
    r.film_ref = std::string(std::string_view(e["film_ref"]));
    r.episode_no = static_cast<std::int32_t>(int64_t(e["episode_no"]));
    r.intent = wandura::intent_from_string(std::string_view(e["intent"]));
    out.episodes.push_back(r);
  }
  out.union_info = std::string(std::string_view(doc["union_info"]));
  out.drm_kek = std::string(std::string_view(doc["drm_kek"]));
  std::string_view viewer;
  if (doc["viewer_ref"].get(viewer) == simdjson::SUCCESS) {
    out.viewer_ref = std::string(viewer);
  }
  return out;
}

} // namespace

TEST_CASE("request writer: a batch is written in the SPEC's shape") {
  std::string out;
  REQUIRE_FALSE(write_ticket_batch(sample_batch(), out));
  CHECK(out == R"({"episodes":[{"film_ref":"the-heiress-returns","episode_no":4,"intent":"play"},)"
               R"({"film_ref":"the-heiress-returns","episode_no":5,"intent":"prefetch"},)"
               R"({"film_ref":"the-heiress-returns","episode_no":6,"intent":"prefetch"}],)"
               R"("union_info":"device-1","drm_kek":"kek-1","viewer_ref":"k3Jd9sQm2vXa7LpT0bWc1e:Zr8uYq2nM4a"})");
  auto no_viewer = sample_batch();
  no_viewer.viewer_ref.reset();
  REQUIRE_FALSE(write_ticket_batch(no_viewer, out));
  CHECK(out.find("viewer_ref") == std::string::npos);
  CHECK(read_back(out) == no_viewer);
}

TEST_CASE("request writer: every control character, quote, backslash and non-ASCII text round-trips") {
  std::string nasty;
  for (int c = 0; c < 0x20; ++c) {
    nasty.push_back(static_cast<char>(c));
  }
  nasty += "\"\\/\x7f quote\" back\\slash Nguy\xE1\xBB\x85n V\xC4\x83n A \xE9\x87\x8D\xE8\xAF\x95 \xF0\x9F\x8E\xAC "
           "\xE2\x80\xA8 end";
  auto batch = sample_batch();
  batch.episodes[0].film_ref = nasty;
  batch.union_info = "dev\nice\t\"1\"";
  batch.drm_kek = std::string("k\0e\x1fk", 5);
  batch.viewer_ref = "\\u0041 not an escape";
  std::string out;
  REQUIRE_FALSE(write_ticket_batch(batch, out));
  CHECK(out.find('\n') == std::string::npos);
  CHECK(out.find(std::string(1, '\0')) == std::string::npos);
  CHECK(out.find("\\u001f") != std::string::npos);
  CHECK(out.find("\\n") != std::string::npos);
  CHECK(read_back(out) == batch);
}

TEST_CASE("request writer: every single byte value round-trips inside a string") {
  std::string out;
  for (int c = 0; c < 0x80; ++c) {
    auto batch = sample_batch();
    batch.union_info = std::string("a") + static_cast<char>(c) + "b";
    INFO(c);
    REQUIRE_FALSE(write_ticket_batch(batch, out));
    CHECK(read_back(out).union_info == batch.union_info);
  }
}

TEST_CASE("request writer: a byte to escape or a non-ASCII byte is found at any position of a longer string") {
  // Strings are checked eight bytes at a time; every position of a 17-byte string is in a word or in the tail.
  std::string out;
  for (std::size_t pos = 0; pos < 17; ++pos) {
    for (int c : {0x00, 0x0a, 0x1f, 0x22, 0x5c, 0x7f}) { // NUL, LF, US, quote, backslash, DEL
      auto batch = sample_batch();
      batch.union_info = std::string(17, 'x');
      batch.union_info[pos] = static_cast<char>(c);
      INFO("byte " << c << " at " << pos);
      REQUIRE_FALSE(write_ticket_batch(batch, out));
      CHECK(read_back(out).union_info == batch.union_info);
    }
    auto batch = sample_batch();
    batch.drm_kek = std::string(17, 'k');
    batch.drm_kek[pos] = '\xff'; // never valid UTF-8
    INFO("0xff at " << pos);
    CHECK(write_ticket_batch(batch, out) == wandura::errc::invalid_argument);
    batch.drm_kek.replace(pos, 1, "\xc3\xa9"); // e-acute: valid, copied as it is
    REQUIRE_FALSE(write_ticket_batch(batch, out));
    CHECK(read_back(out).drm_kek == batch.drm_kek);
  }
}

TEST_CASE("request writer: a reused string keeps its buffer") {
  std::string out;
  REQUIRE_FALSE(write_ticket_batch(sample_batch(), out));
  auto const* data = out.data();
  auto const capacity = out.capacity();
  REQUIRE_FALSE(write_ticket_batch(sample_batch(), out));
  CHECK(out.data() == data);
  CHECK(out.capacity() == capacity);
}

TEST_CASE("request writer: batches the server would refuse are invalid_argument before sending") {
  struct bad_case {
    std::function<void(ticket_batch&)> change;
    std::string message_part;
  };
  std::vector<bad_case> const cases = {
      {[](ticket_batch& b) { b.episodes.clear(); }, "episodes is empty"},
      {[](ticket_batch& b) {
         b.episodes.push_back({"x", 7, intent::prefetch});
       },
       "more than 3"},
      {[](ticket_batch& b) { b.episodes[1].film_ref.clear(); }, "episodes[1].film_ref is empty"},
      {[](ticket_batch& b) { b.episodes[2].episode_no = 0; }, "episodes[2].episode_no"},
      {[](ticket_batch& b) { b.episodes[0].intent = intent::other; }, "episodes[0].intent"},
      {[](ticket_batch& b) { b.union_info.clear(); }, "union_info is empty"},
      {[](ticket_batch& b) { b.drm_kek.clear(); }, "drm_kek is empty"},
      {[](ticket_batch& b) { b.viewer_ref = ""; }, "viewer_ref is empty"},
      {[](ticket_batch& b) { b.episodes[0].film_ref = "bad\xff"; }, "episodes[0].film_ref is not valid UTF-8"},
      {[](ticket_batch& b) { b.union_info = "\xC0\xAF"; }, "union_info is not valid UTF-8"},         // overlong '/'
      {[](ticket_batch& b) { b.drm_kek = "\xED\xA0\x80"; }, "drm_kek is not valid UTF-8"},           // surrogate
      {[](ticket_batch& b) { b.viewer_ref = "\xF4\x90\x80\x80"; }, "viewer_ref is not valid UTF-8"}, // > U+10FFFF
      {[](ticket_batch& b) { b.union_info = "cut \xE1\xBB"; }, "union_info is not valid UTF-8"},     // truncated
  };
  for (auto const& c : cases) {
    auto batch = sample_batch();
    c.change(batch);
    std::string out;
    std::string message;
    INFO(c.message_part);
    CHECK(write_ticket_batch(batch, out, &message) == wandura::errc::invalid_argument);
    CHECK(message.find(c.message_part) != std::string::npos);
    CHECK(out.empty());
  }
}

TEST_CASE("request writer: some episodes of a checked batch are written as a batch of those episodes alone") {
  auto batch = sample_batch();
  batch.episodes[2].film_ref = "needs \"escaping\"\n\xC3\xA9";
  REQUIRE_FALSE(wandura::detail::check_ticket_batch(batch));
  std::vector<std::vector<std::size_t>> const choices{{0}, {1}, {2}, {0, 2}, {2, 0}, {1, 2}, {0, 1, 2}};
  for (auto const& chosen : choices) {
    ticket_batch alone = batch;
    alone.episodes.clear();
    for (std::size_t const i : chosen) {
      alone.episodes.push_back(batch.episodes[i]);
    }
    std::string expected;
    REQUIRE_FALSE(write_ticket_batch(alone, expected));
    std::string out = "left over from an earlier body";
    wandura::detail::write_checked_ticket_batch(batch, chosen, out);
    CHECK(out == expected);
    CHECK(read_back(out).episodes.size() == chosen.size());
  }
  batch.viewer_ref.reset();
  std::string expected;
  REQUIRE_FALSE(write_ticket_batch(batch, expected));
  std::string out;
  wandura::detail::write_checked_ticket_batch(batch, std::vector<std::size_t>{0, 1, 2}, out);
  CHECK(out == expected);
}

TEST_CASE("request writer: the checks alone refuse what write_ticket_batch refuses, with the same words") {
  auto batch = sample_batch();
  batch.episodes[1].episode_no = 0;
  std::string message;
  CHECK(wandura::detail::check_ticket_batch(batch, &message) == wandura::errc::invalid_argument);
  CHECK(message == "episodes[1].episode_no is below 1");
  std::string out;
  std::string written_message;
  CHECK(write_ticket_batch(batch, out, &written_message) == wandura::errc::invalid_argument);
  CHECK(written_message == message);
  batch = sample_batch();
  batch.drm_kek.clear();
  CHECK(wandura::detail::check_ticket_batch(batch, &message) == wandura::errc::invalid_argument);
  CHECK(message == "drm_kek is empty");
}

TEST_CASE("request writer: an episode named twice with one intent is refused, with another intent or film it is not") {
  auto batch = sample_batch();
  batch.episodes[2] = batch.episodes[0];
  std::string message;
  CHECK(wandura::detail::check_ticket_batch(batch, &message) == wandura::errc::invalid_argument);
  CHECK(message == "episodes[2] repeats episodes[0]");
  batch.episodes[2].intent =
      batch.episodes[0].intent == wandura::intent::play ? wandura::intent::prefetch : wandura::intent::play;
  CHECK_FALSE(wandura::detail::check_ticket_batch(batch, &message));
  batch.episodes[2] = batch.episodes[0];
  batch.episodes[2].film_ref += "-other";
  CHECK_FALSE(wandura::detail::check_ticket_batch(batch, &message));
}
