#include "wandura/fleet/redis_url.hpp"

#include <catch2/catch.hpp>

#include "wandura/error.hpp"

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
    INFO(bad);
    try {
      (void)wandura::redis_url::parse(bad);
      FAIL("accepted");
    } catch (wandura::error const& e) {
      CHECK(e.code() == wandura::errc::invalid_argument);
      CHECK(std::string(e.what()).find("hunter2") == std::string::npos);
    }
  }
}
