#include "wandura/transport/transport_options.hpp"

#include <catch2/catch.hpp>

TEST_CASE("transport options: defaults verify TLS, cap bodies at 1 MiB and keep connections alive") {
  wandura::transport_options const o;
  CHECK(o.max_response_bytes == 1048576);
  CHECK(o.verify_peer);
  CHECK(o.verify_host);
  CHECK(o.ca_bundle.empty());
  CHECK_FALSE(o.http2_prior_knowledge);
  CHECK(o.tcp_keepalive);
  CHECK(o.max_in_flight > 0);
  CHECK(o.default_connect_timeout.count() > 0);
  CHECK(o.max_idle_age.count() > 0);
}
