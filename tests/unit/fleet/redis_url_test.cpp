#include "wandura/fleet/redis_url.hpp"

#include <catch2/catch.hpp>

#include "wandura/error.hpp"

namespace {

/// `url` is refused with invalid_argument, and the message does not show the password the bad URLs carry.
void check_refused(std::string const& url) {
  INFO(url);
  try {
    (void)wandura::redis_url::parse(url);
    FAIL("accepted");
  } catch (wandura::error const& e) {
    CHECK(e.code() == wandura::errc::invalid_argument);
    CHECK(std::string(e.what()).find("hunter2") == std::string::npos);
  }
}

} // namespace

TEST_CASE("redis url: host, port, user, password and db are read") {
  auto const url = wandura::redis_url::parse("redis://fleet:p%40ss@10.0.0.7:6380/3");
  CHECK(url.host == "10.0.0.7");
  CHECK(url.port == 6380);
  CHECK(url.user == "fleet");
  CHECK(url.password == "p@ss");
  CHECK(url.db == 3);
  CHECK(url.redacted() == "10.0.0.7:6380/3");
}

TEST_CASE("redis url: defaults, a password alone and IPv6") {
  auto const plain = wandura::redis_url::parse("redis://localhost");
  CHECK(plain.host == "localhost");
  CHECK(plain.port == 6379);
  CHECK(plain.password.empty());
  CHECK(plain.db == 0);
  auto const pw = wandura::redis_url::parse("redis://:only@127.0.0.1:7000");
  CHECK(pw.user.empty());
  CHECK(pw.password == "only");
  auto const v6 = wandura::redis_url::parse("redis://[::1]:7001/1");
  CHECK(v6.host == "::1");
  CHECK(v6.port == 7001);
  CHECK(v6.redacted() == "[::1]:7001/1");
}

TEST_CASE("redis url: bad URLs are invalid_argument and the message never shows the password") {
  for (char const* bad : {"http://h:1", "rediss://u:hunter2@h:1", "redis://:hunter2@h:0", "redis://:hunter2@h:x",
                          "redis://:hunter2@:6379", "redis://:hunter2@h:6379/db", "redis://:hunter2@[::1",
                          "redis://:hunter2%zz@h:6379", "redis://:hunter2@h:70000"}) {
    check_refused(bad);
  }
}

TEST_CASE("redis url: a host with a control character, a space or an unbracketed IPv6 address is refused") {
  using namespace std::string_literals;
  for (auto const& bad :
       {"redis://:hunter2@h h:1"s, "redis://:hunter2@h\r\nX:1"s, "redis://:hunter2@h\0x:1"s, "redis://:hunter2@h\tx"s,
        "redis://:hunter2@h\x7fx:1"s, "redis://:hunter2@[::1\n]:1"s, "redis://:hunter2@::1:6379"s, "redis://::1"s}) {
    check_refused(bad);
  }
  CHECK(wandura::redis_url::parse("redis://[::1]:6379").host == "::1");
}

TEST_CASE("redis url: a host in brackets is an IPv6 address and a name holds only what a host name can") {
  // Found by fuzz_fleet_values: "[[\xff0]" was accepted as the host "[\xff0", whose redacted URL did not parse.
  using namespace std::string_literals;
  for (auto const& bad :
       {"redis://[[::1]]:1"s, "redis://[\xff::0]"s, "redis://[localhost]:1"s, "redis://[1.2.3.4]"s,
        "redis://[fe80::1%25eth0]:1"s, "redis://h\xffst:1"s, "redis://a[b:1"s, "redis://h%41:1"s, "redis://h\"x"s}) {
    check_refused(bad);
  }
  CHECK(wandura::redis_url::parse("redis://[2001:DB8::7]:1").host == "2001:DB8::7");
  CHECK(wandura::redis_url::parse("redis://[::ffff:10.0.0.7]").host == "::ffff:10.0.0.7");
  CHECK(wandura::redis_url::parse("redis://redis-0.redis_svc.default~1:1").host == "redis-0.redis_svc.default~1");
}

TEST_CASE("redis url: brackets around hex digits and colons that are no IPv6 address are refused") {
  // A new-user trial: the characters alone let these through, and the first command failed later to connect.
  using namespace std::string_literals;
  for (auto const& bad : {"redis://[:]:1"s, "redis://[:::]:1"s, "redis://[1::2::3]:1"s, "redis://[12345::]:1"s,
                          "redis://[1:2:3:4:5:6:7:8:9:a:b]:1"s, "redis://[::1.2.3.4.5]:1"s, "redis://[1:2]:1"s}) {
    check_refused(bad);
  }
  CHECK(wandura::redis_url::parse("redis://[::]:1").host == "::");
  CHECK(wandura::redis_url::parse("redis://[1:2:3:4:5:6:7:8]:1").host == "1:2:3:4:5:6:7:8");
  CHECK(wandura::redis_url::parse("redis://[::1.2.3.4]:1").host == "::1.2.3.4");
}

TEST_CASE("redis url: the scheme is read in any case, rediss:// refused in any case") {
  auto const upper = wandura::redis_url::parse("REDIS://h:1/2");
  CHECK(upper.host == "h");
  CHECK(upper.port == 1);
  CHECK(upper.db == 2);
  CHECK(wandura::redis_url::parse("Redis://h").host == "h");
  for (char const* tls : {"REDISS://h:1", "Rediss://h:1"}) {
    INFO(tls);
    try {
      (void)wandura::redis_url::parse(tls);
      FAIL("accepted");
    } catch (wandura::error const& e) {
      CHECK(std::string(e.what()).find("TLS") != std::string::npos);
    }
  }
}

TEST_CASE("redis url: a query string or fragment is refused with a message that says so") {
  for (char const* bad : {"redis://:hunter2@h:6379?db=1", "redis://:hunter2@h:6379/1?timeout=5", "redis://h?x"}) {
    INFO(bad);
    try {
      (void)wandura::redis_url::parse(bad);
      FAIL("accepted");
    } catch (wandura::error const& e) {
      CHECK(e.code() == wandura::errc::invalid_argument);
      CHECK(std::string(e.what()).find("query string") != std::string::npos);
      CHECK(std::string(e.what()).find("1-65535") == std::string::npos); // not reported as a bad port
      CHECK(std::string(e.what()).find("hunter2") == std::string::npos);
    }
  }
  try {
    (void)wandura::redis_url::parse("redis://h:6379/2#main");
    FAIL("accepted");
  } catch (wandura::error const& e) {
    CHECK(std::string(e.what()).find("fragment") != std::string::npos);
  }
  // A ? or # in the password, not escaped, is still the password's.
  auto const odd = wandura::redis_url::parse("redis://:pa?s#s@h:1/2");
  CHECK(odd.password == "pa?s#s");
  CHECK(odd.port == 1);
  CHECK(odd.db == 2);
}

TEST_CASE("redis url: the redacted URL shows the user, never the password, and reads back") {
  auto const full = wandura::redis_url::parse("redis://fleet:s3cret@10.0.0.7:6380/3");
  CHECK(full.redacted_url() == "redis://fleet:***@10.0.0.7:6380/3");
  CHECK(wandura::redis_url::parse("redis://s3cret@h").redacted_url() == "redis://:***@h:6379");
  CHECK(wandura::redis_url::parse("redis://:s3cret@h:7000/0").redacted_url() == "redis://:***@h:7000");
  CHECK(wandura::redis_url::parse("redis://h").redacted_url() == "redis://h:6379");
  CHECK(wandura::redis_url::parse("redis://[::1]:7001/1").redacted_url() == "redis://[::1]:7001/1");

  // A user with characters a URL must escape, and a user without a password, read back as they were.
  auto const odd = wandura::redis_url::parse("redis://a%40b%3Ac:p%40ss@h:1/2");
  REQUIRE(odd.user == "a@b:c");
  auto const shown = odd.redacted_url();
  CHECK(shown == "redis://a%40b%3Ac:***@h:1/2");
  CHECK(shown.find("p@ss") == std::string::npos);
  auto const back = wandura::redis_url::parse(shown);
  CHECK(back.user == odd.user);
  CHECK(back.host == odd.host);
  CHECK(back.port == odd.port);
  CHECK(back.db == odd.db);
  auto const user_only = wandura::redis_url::parse("redis://fleet:@h");
  CHECK(user_only.redacted_url() == "redis://fleet:@h:6379");
  CHECK(wandura::redis_url::parse(user_only.redacted_url()).user == "fleet");
  CHECK(wandura::redis_url::parse(user_only.redacted_url()).password.empty());
}
