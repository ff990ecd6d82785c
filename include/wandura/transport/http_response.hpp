// One HTTP response: status, headers (case-insensitive, repeats kept) and a padded body.
//
// Thread safety: plain values; distinct objects may be used from distinct threads.
#pragma once

#include <algorithm>
#include <charconv>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <limits>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>
#include <vector>

namespace wandura {

/// `value` without the optional white space (spaces and horizontal tabs, RFC 9110 "OWS") around a header field
/// value.
[[nodiscard]] constexpr std::string_view trim_ows(std::string_view value) noexcept {
  while (!value.empty() && (value.front() == ' ' || value.front() == '\t')) {
    value.remove_prefix(1);
  }
  while (!value.empty() && (value.back() == ' ' || value.back() == '\t')) {
    value.remove_suffix(1);
  }
  return value;
}

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
///
/// Names and values live in one buffer (two allocations per response however many headers arrive); the views
/// that `find`, `find_all` and `fields` return stay valid while the object is alive and not modified.
class http_headers {
public:
  /// One header as received: name as sent (any case), value without surrounding spaces and tabs.
  struct field {
    std::string_view name;
    std::string_view value;
  };

  /// Appends a header. `name` and `value` may view this object's own headers. A header block over 4 GiB is
  /// refused with std::length_error.
  void add(std::string_view name, std::string_view value) {
    if (views_own_bytes(name) || views_own_bytes(value)) {
      std::string const copy = std::string(name).append(value); // growing bytes_ would invalidate the views
      add(std::string_view(copy).substr(0, name.size()), std::string_view(copy).substr(name.size()));
      return;
    }
    if (entries_.empty() && entries_.capacity() == 0) {
      entries_.reserve(typical_count);
      bytes_.reserve(typical_bytes);
    }
    if (bytes_.size() + name.size() + value.size() > std::numeric_limits<std::uint32_t>::max()) {
      throw std::length_error("http_headers: header block over 4 GiB");
    }
    entry e{};
    e.name_offset = static_cast<std::uint32_t>(bytes_.size());
    e.name_size = static_cast<std::uint32_t>(name.size());
    e.value_offset = static_cast<std::uint32_t>(bytes_.size() + name.size());
    e.value_size = static_cast<std::uint32_t>(value.size());
    bytes_.append(name).append(value);
    entries_.push_back(e); // last: if anything throws, no entry refers to missing bytes
  }
  /// Removes every header, keeping the storage.
  void clear() noexcept {
    entries_.clear();
    bytes_.clear();
  }

  /// The first value of `name`, or nullopt.
  [[nodiscard]] std::optional<std::string_view> find(std::string_view name) const noexcept {
    for (auto const& e : entries_) {
      if (iequals(name_of(e), name)) {
        return value_of(e);
      }
    }
    return std::nullopt;
  }

  /// Every value of `name`, in arrival order.
  [[nodiscard]] std::vector<std::string_view> find_all(std::string_view name) const {
    std::vector<std::string_view> out;
    for (auto const& e : entries_) {
      if (iequals(name_of(e), name)) {
        out.push_back(value_of(e));
      }
    }
    return out;
  }

  /// The `i`th header in arrival order; `i < size()`.
  [[nodiscard]] field operator[](std::size_t i) const noexcept { return {name_of(entries_[i]), value_of(entries_[i])}; }
  /// Every header in arrival order.
  [[nodiscard]] std::vector<field> fields() const {
    std::vector<field> out;
    out.reserve(entries_.size());
    for (auto const& e : entries_) {
      out.push_back({name_of(e), value_of(e)});
    }
    return out;
  }
  [[nodiscard]] std::size_t size() const noexcept { return entries_.size(); }
  [[nodiscard]] bool empty() const noexcept { return entries_.empty(); }

private:
  static constexpr std::size_t typical_count = 12;  ///< headers of a typical API response
  static constexpr std::size_t typical_bytes = 384; ///< their names and values

  struct entry {
    std::uint32_t name_offset;
    std::uint32_t name_size;
    std::uint32_t value_offset;
    std::uint32_t value_size;
  };
  [[nodiscard]] bool views_own_bytes(std::string_view s) const noexcept {
    return !s.empty() && !bytes_.empty() && std::less_equal<>()(bytes_.data(), s.data()) &&
           std::less<>()(s.data(), bytes_.data() + bytes_.size());
  }
  [[nodiscard]] std::string_view name_of(entry const& e) const noexcept {
    return std::string_view(bytes_).substr(e.name_offset, e.name_size);
  }
  [[nodiscard]] std::string_view value_of(entry const& e) const noexcept {
    return std::string_view(bytes_).substr(e.value_offset, e.value_size);
  }

  std::vector<entry> entries_;
  std::string bytes_;
};

/// A byte buffer that always keeps `body_padding` readable bytes after its end, copies and moved-from objects
/// included, so that simdjson parses it in place: `capacity() >= size() + body_padding` at all times, and those
/// bytes are zeros (simdjson reads into them: a memory checker such as valgrind then sees no uninitialised byte
/// decide anything). An empty body allocates nothing (its data points to a shared, zeroed block of `body_padding`
/// bytes). Growing throws
/// std::bad_alloc, or std::length_error past max_size(); the content is then unchanged.
class response_body {
public:
  response_body() noexcept = default;
  response_body(response_body const& other) : response_body() { assign(other.view()); }
  response_body(response_body&& other) noexcept
      : data_(std::exchange(other.data_, nullptr)), size_(std::exchange(other.size_, 0)),
        capacity_(std::exchange(other.capacity_, 0)) {}
  response_body& operator=(response_body const& other) {
    if (this != &other) {
      assign(other.view());
    }
    return *this;
  }
  response_body& operator=(response_body&& other) noexcept {
    if (this != &other) {
      delete[] data_;
      data_ = std::exchange(other.data_, nullptr);
      size_ = std::exchange(other.size_, 0);
      capacity_ = std::exchange(other.capacity_, 0);
    }
    return *this;
  }
  ~response_body() { delete[] data_; }

  /// Replaces the content with `bytes`, which may view this body itself.
  void assign(std::string_view bytes) {
    if (bytes.empty()) {
      clear(); // zeroes the padding, which append(…, 0) would leave holding the old content
      return;
    }
    size_ = 0;
    append(bytes.data(), bytes.size()); // append copies from `bytes` before it frees or overwrites anything
  }
  /// Appends `n` bytes from `data`, which may point into this body itself; grows geometrically and keeps the
  /// padding.
  void append(char const* data, std::size_t n) {
    if (n == 0) {
      return;
    }
    if (n > max_size() - size_) {
      throw std::length_error("response_body: over max_size()");
    }
    if (capacity_ < size_ + n + body_padding) {
      // The new block gets both parts before the old one is freed: `data` may point into it.
      replace_storage(std::max(capacity_ * 2, size_ + n + body_padding), data_, size_, data, n);
    } else {
      std::memmove(data_ + size_, data, n);
    }
    size_ += n;
    std::memset(data_ + size_, 0, body_padding);
  }
  /// Empties the body, keeping its storage for reuse.
  void clear() noexcept {
    size_ = 0;
    if (data_ != nullptr) {
      std::memset(data_, 0, body_padding);
    }
  }
  /// Makes room for `n` bytes of content (plus the padding) without further allocation.
  void reserve(std::size_t n) {
    if (n > max_size()) {
      throw std::length_error("response_body: over max_size()");
    }
    if (capacity_ < n + body_padding) {
      replace_storage(n + body_padding, data_, size_, nullptr, 0);
    }
  }

  [[nodiscard]] std::string_view view() const noexcept { return {data(), size_}; }
  [[nodiscard]] char const* data() const noexcept { return data_ != nullptr ? data_ : empty_storage; }
  [[nodiscard]] std::size_t size() const noexcept { return size_; }
  /// The largest content a body can hold.
  [[nodiscard]] static constexpr std::size_t max_size() noexcept {
    return static_cast<std::size_t>(std::numeric_limits<std::ptrdiff_t>::max()) - body_padding;
  }
  [[nodiscard]] bool empty() const noexcept { return size_ == 0; }
  /// Readable bytes from data(); always >= size() + body_padding.
  [[nodiscard]] std::size_t capacity() const noexcept { return data_ != nullptr ? capacity_ : body_padding; }

private:
  /// Moves to a new block of `capacity` bytes holding `first` (n1 bytes) then `second` (n2 bytes); either may
  /// point into the old block, which is freed last. Does not change size_.
  void replace_storage(std::size_t capacity, char const* first, std::size_t n1, char const* second, std::size_t n2) {
    auto* block = new char[capacity];
    if (n1 != 0) {
      std::memcpy(block, first, n1);
    }
    if (n2 != 0) {
      std::memcpy(block + n1, second, n2);
    }
    std::memset(block + n1 + n2, 0, body_padding);
    delete[] data_;
    data_ = block;
    capacity_ = capacity;
  }

  static constexpr char empty_storage[body_padding] = {};
  char* data_ = nullptr; ///< owned; null until the first byte (or reserve)
  std::size_t size_ = 0;
  std::size_t capacity_ = 0;
};

/// The response to one attempt.
struct http_response {
  /// HTTP status, e.g. 200 or 503.
  int status = 0;
  /// 11 for HTTP/1.1, 20 for HTTP/2.
  int http_version = 0;
  /// The final response's header section only: not those of interim (1xx) responses before it, and not trailer
  /// fields sent after the body (chunked or HTTP/2 trailers), which the transport drops (RFC 9110 §6.5.1: trailers
  /// must not be merged into the header section; a trailer `Retry-After` or `Content-Length` means nothing here).
  http_headers headers;
  response_body body;

  /// Raw `Retry-After` text (delta-seconds or HTTP-date), unparsed; the first of several (the retry engine reads
  /// them all and waits the longest: resilience/retry_after.hpp).
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
