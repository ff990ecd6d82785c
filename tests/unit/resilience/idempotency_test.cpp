#include "wandura/resilience/idempotency.hpp"

#include <set>

#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>

#include "wandura/error.hpp"

TEST_CASE("idempotency keys: automatic keys are 32 lowercase hex characters and differ every time") {
  std::set<std::string> seen;
  for (int i = 0; i < 200; ++i) {
    std::string key;
    REQUIRE_FALSE(wandura::make_idempotency_key(key));
    REQUIRE(key.size() == 32);
    for (char c : key) {
      CHECK(((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f')));
    }
    CHECK_FALSE(wandura::validate_idempotency_key(key));
    seen.insert(key);
  }
  CHECK(seen.size() == 200);
}

TEST_CASE("idempotency keys: caller keys of 1-200 visible ASCII characters are accepted") {
  CHECK_FALSE(wandura::validate_idempotency_key("order-20261008-0001"));
  CHECK_FALSE(wandura::validate_idempotency_key("x"));
  CHECK_FALSE(wandura::validate_idempotency_key(std::string(200, '~')));
  CHECK_FALSE(wandura::validate_idempotency_key("!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~"));
}

TEST_CASE("idempotency keys: anything else is refused with invalid_idempotency_key (90010)") {
  using namespace std::string_literals;
  for (auto const& bad :
       {""s, std::string(201, 'a'), "has space"s, "tab\there"s, "new\nline"s, "nul\0x"s, "caf\xc3\xa9"s, "\x7f"s}) {
    INFO("key: " << bad);
    CHECK(wandura::validate_idempotency_key(bad) == wandura::errc::invalid_idempotency_key);
  }
  CHECK(std::error_code(wandura::errc::invalid_idempotency_key).message().find("90010") != std::string::npos);
}

TEST_CASE("idempotency keys: a forked child never makes the key its parent makes next") {
  // The parent's per-thread block of random bytes is copied into the child by fork(); the child must draw afresh.
  std::string first;
  REQUIRE_FALSE(wandura::make_idempotency_key(first));
  int fds[2];
  REQUIRE(::pipe(fds) == 0);
  pid_t const child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    std::string key;
    bool const ok = !wandura::make_idempotency_key(key) && key.size() == 32;
    ssize_t const written = ok ? ::write(fds[1], key.data(), key.size()) : 0;
    ::_exit(written == 32 ? 0 : 1);
  }
  ::close(fds[1]);
  std::string from_child(32, '\0');
  std::size_t got = 0;
  while (got < from_child.size()) {
    ssize_t const n = ::read(fds[0], from_child.data() + got, from_child.size() - got);
    if (n <= 0) {
      break;
    }
    got += static_cast<std::size_t>(n);
  }
  ::close(fds[0]);
  int status = 0;
  REQUIRE(::waitpid(child, &status, 0) == child);
  REQUIRE(WIFEXITED(status));
  REQUIRE(WEXITSTATUS(status) == 0);
  REQUIRE(got == 32);
  std::string next;
  REQUIRE_FALSE(wandura::make_idempotency_key(next));
  CHECK(from_child != next);
  CHECK(from_child != first);
}
