// The bounds on a reply a hiredis reader has not finished (src/fleet/reply_size.hpp): the arrays' declared elements.
#include "fleet/reply_size.hpp"
#include "repeated_text.hpp"
#include "wandura/fleet/redis_client.hpp"

#include <climits>
#include <memory>
#include <string>
#include <string_view>

#include <catch2/catch.hpp>
#include <hiredis/hiredis.h>

namespace {

using reader_ptr = std::unique_ptr<redisReader, decltype(&redisReaderFree)>;
using reply_ptr = std::unique_ptr<redisReply, decltype(&freeReplyObject)>;

/// How a reader bounded by `max_reply_bytes` (and `max_elements`) reads `bytes`: the reply, or null and whether it
/// failed.
struct read_result {
  reply_ptr reply{nullptr, &freeReplyObject};
  bool failed = false;
};

read_result read_bounded(std::string_view bytes, std::size_t max_reply_bytes,
                         std::size_t max_elements = wandura::redis_options{}.max_reply_elements) {
  wandura::detail::declared_elements elements(max_reply_bytes, max_elements);
  reader_ptr reader(redisReaderCreate(), &redisReaderFree);
  REQUIRE(reader);
  wandura::detail::bound_arrays(*reader, elements);
  REQUIRE(redisReaderFeed(reader.get(), bytes.data(), bytes.size()) == REDIS_OK);
  read_result result;
  void* raw = nullptr;
  result.failed = redisReaderGetReply(reader.get(), &raw) != REDIS_OK;
  result.reply.reset(static_cast<redisReply*>(raw));
  return result;
}

using test_support::repeated;

} // namespace

TEST_CASE("declared elements: the arrays of one reply declare at most max_reply_bytes / 3 elements in all, and "
          "each reply counts afresh") {
  redisReadTask root{};
  redisReadTask nested{};
  nested.parent = &root;
  wandura::detail::declared_elements elements(32, 1000); // 10 elements of 3 bytes, and 2 bytes to spare

  CHECK(elements.admit(root, 2));
  CHECK(elements.admit(nested, 8)); // ten in all
  CHECK_FALSE(elements.admit(nested, 1));
  CHECK(elements.admit(root, 10)); // another reply
  CHECK_FALSE(elements.admit(root, 11));
  CHECK(elements.admit(root, 0));
  CHECK_FALSE(elements.admit(root, INT_MAX));
  CHECK(wandura::detail::declared_elements(2, 1000).admit(root, 0));
  CHECK_FALSE(wandura::detail::declared_elements(2, 1000).admit(root, 1));
}

TEST_CASE("declared elements: max_reply_elements bounds them below what max_reply_bytes could carry") {
  redisReadTask root{};
  redisReadTask nested{};
  nested.parent = &root;
  wandura::detail::declared_elements elements(std::size_t{8} << 20U, 10);
  CHECK(elements.admit(root, 2));
  CHECK(elements.admit(nested, 8));
  CHECK_FALSE(elements.admit(nested, 1));
  CHECK(elements.admit(root, 10));
  CHECK_FALSE(elements.admit(root, 11));
  // The default: far below the 2.8 million 8 MiB could carry, far above the fleet's own replies.
  auto const defaults = wandura::redis_options{};
  CHECK(defaults.max_reply_elements < defaults.max_reply_bytes / 3);
  CHECK(read_bounded("*" + std::to_string(defaults.max_reply_elements + 1) + "\r\n", defaults.max_reply_bytes).failed);
  CHECK(read_bounded("*2\r\n*" + std::to_string(defaults.max_reply_elements - 1) + "\r\n", defaults.max_reply_bytes)
            .failed);
  auto const at_default = read_bounded("*" + std::to_string(defaults.max_reply_elements) + "\r\n" +
                                           repeated("+\r\n", defaults.max_reply_elements),
                                       defaults.max_reply_bytes);
  REQUIRE_FALSE(at_default.failed);
  REQUIRE(at_default.reply);
  CHECK(at_default.reply->elements == defaults.max_reply_elements);
}

TEST_CASE("declared elements: a bounded reader refuses an array past the bound as its header comes, and reads one "
          "at the bound whole") {
  // 30 bytes carry 10 elements of `+\r\n`.
  auto const at_bound = read_bounded("*2\r\n*8\r\n" + repeated("+\r\n", 8) + ":7\r\n", 30);
  REQUIRE_FALSE(at_bound.failed);
  REQUIRE(at_bound.reply);
  REQUIRE(at_bound.reply->elements == 2);
  CHECK(at_bound.reply->element[0]->elements == 8);
  CHECK(at_bound.reply->element[1]->integer == 7);

  CHECK(read_bounded("*2\r\n*9\r\n", 30).failed);           // eleven, refused before any element came
  CHECK(read_bounded("*2000000000\r\n", 8U << 20U).failed); // hiredis alone takes it, and allocates 16 GB
  CHECK(read_bounded("*1\r\n*1\r\n*2000000000\r\n", 8U << 20U).failed);
  CHECK_FALSE(read_bounded("*-1\r\n", 0).failed); // a nil array declares nothing
}
