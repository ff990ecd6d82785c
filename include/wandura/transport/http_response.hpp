// One HTTP response: status, headers (case-insensitive, repeats kept) and a padded body.
//
// Thread safety: plain values; distinct objects may be used from distinct threads.
#pragma once

#include <algorithm>
#include <charconv>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

namespace wandura {

/// Bytes of readable slack the body keeps after its end, so that simdjson parses it in place without a copy.
/// Equal to SIMDJSON_PADDING (checked where the parser includes simdjson).
inline constexpr std::size_t body_padding = 64;

/// ASCII case-insensitive equality, as HTTP header names compare.
[[nodiscard]] constexpr bool iequals(std::string_view a, std::string_view b) noexcept {
  if (a.size() != b.size()) {
    return false;
  }
  for (std::size_t i = 0; i < a.size(); ++i) {
    auto lower = [](char c) { return (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c; };
    if (lower(a[i]) != lower(b[i])) {
      return false;
    }
  }
  return true;
}

/// Response headers in arrival order. Lookups are case-insensitive; repeated headers are all kept.
class http_headers {
public:
  struct field {
    std::string name;
    std::string value;
  };

  void add(std::string name, std::string value) { fields_.push_back({std::move(name), std::move(value)}); }
  void clear() noexcept { fields_.clear(); }
  /// Makes room for `n` fields without reallocation (the transport reserves a typical response's count).
  void reserve(std::size_t n) { fields_.reserve(n); }

  /// The first value of `name`, or nullopt. The view lives as long as this object is unchanged.
  [[nodiscard]] std::optional<std::string_view> find(std::string_view name) const noexcept {
    for (auto const& f : fields_) {
      if (iequals(f.name, name)) {
        return std::string_view(f.value);
      }
    }
    return std::nullopt;
  }

  /// Every value of `name`, in arrival order.
  [[nodiscard]] std::vector<std::string_view> find_all(std::string_view name) const {
    std::vector<std::string_view> out;
    for (auto const& f : fields_) {
      if (iequals(f.name, name)) {
        out.emplace_back(f.value);
      }
    }
    return out;
  }

  [[nodiscard]] std::vector<field> const& fields() const noexcept { return fields_; }
  [[nodiscard]] std::size_t size() const noexcept { return fields_.size(); }
  [[nodiscard]] bool empty() const noexcept { return fields_.empty(); }

private:
  std::vector<field> fields_;
};

/// A byte buffer that always keeps `body_padding` bytes of slack after its end, copies included.
class response_body {
public:
  response_body() { bytes_.reserve(body_padding); }
  response_body(response_body const& other) : response_body() { assign(other.view()); }
  response_body(response_body&&) noexcept = default;
  response_body& operator=(response_body const& other) {
    if (this != &other) {
      assign(other.view());
    }
    return *this;
  }
  response_body& operator=(response_body&&) noexcept = default;
  ~response_body() = default;

  void assign(std::string_view bytes) {
    bytes_.reserve(bytes.size() + body_padding);
    bytes_.assign(bytes.data(), bytes.size());
  }
  /// Appends; grows geometrically and keeps the padding.
  void append(char const* data, std::size_t n) {
    if (bytes_.capacity() < bytes_.size() + n + body_padding) {
      bytes_.reserve(std::max(bytes_.capacity() * 2, bytes_.size() + n + body_padding));
    }
    bytes_.append(data, n);
  }
  /// Empties the body, keeping its capacity for reuse.
  void clear() noexcept { bytes_.clear(); }
  void reserve(std::size_t n) { bytes_.reserve(n + body_padding); }

  [[nodiscard]] std::string_view view() const noexcept { return bytes_; }
  [[nodiscard]] char const* data() const noexcept { return bytes_.data(); }
  [[nodiscard]] std::size_t size() const noexcept { return bytes_.size(); }
  [[nodiscard]] bool empty() const noexcept { return bytes_.empty(); }
  /// Allocated bytes; always >= size() + body_padding.
  [[nodiscard]] std::size_t capacity() const noexcept { return bytes_.capacity(); }

private:
  std::string bytes_;
};

/// The response to one attempt.
struct http_response {
  /// HTTP status, e.g. 200 or 503.
  int status = 0;
  /// 11 for HTTP/1.1, 20 for HTTP/2.
  int http_version = 0;
  http_headers headers;
  response_body body;

  /// Raw `Retry-After` text (delta-seconds or HTTP-date), unparsed; see resilience/retry_after.hpp.
  [[nodiscard]] std::optional<std::string_view> retry_after() const noexcept { return headers.find("retry-after"); }
  /// Raw `Date` text, for correcting HTTP-date `Retry-After` values for clock skew.
  [[nodiscard]] std::optional<std::string_view> date() const noexcept { return headers.find("date"); }
  /// `X-Request-Id`, when the server sent one.
  [[nodiscard]] std::optional<std::string_view> request_id() const noexcept { return headers.find("x-request-id"); }
  /// `X-RateLimit-Limit` as a number; nullopt when absent or not a non-negative integer.
  [[nodiscard]] std::optional<std::int64_t> rate_limit_limit() const noexcept {
    return header_integer("x-ratelimit-limit");
  }
  /// `X-RateLimit-Window` in seconds; nullopt when absent or not a non-negative integer.
  [[nodiscard]] std::optional<std::int64_t> rate_limit_window() const noexcept {
    return header_integer("x-ratelimit-window");
  }
  /// True when the server says this is the stored result of an earlier request with the same idempotency key.
  [[nodiscard]] bool idempotency_replayed() const noexcept {
    auto v = headers.find("idempotency-replayed");
    return v && iequals(*v, "true");
  }

private:
  [[nodiscard]] std::optional<std::int64_t> header_integer(std::string_view name) const noexcept {
    auto v = headers.find(name);
    if (!v || v->empty()) {
      return std::nullopt;
    }
    std::int64_t n = 0;
    auto [end, ec] = std::from_chars(v->data(), v->data() + v->size(), n);
    if (ec != std::errc() || end != v->data() + v->size() || n < 0) {
      return std::nullopt;
    }
    return n;
  }
};

} // namespace wandura
