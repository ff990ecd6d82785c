#include "wandura/fleet/redis_url.hpp"

#include <array>
#include <charconv>
#include <optional>
#include <string>

#include <arpa/inet.h>
#include <sys/socket.h>

#include "wandura/error.hpp"

namespace wandura {
namespace {

[[noreturn]] void refuse(std::string_view why) {
  throw error(errc::invalid_argument, "redis url: " + std::string(why));
}

/// Whether `text` starts with the lower-case ASCII `prefix`, in any case.
bool starts_with_nocase(std::string_view text, std::string_view prefix) noexcept {
  if (text.size() < prefix.size()) {
    return false;
  }
  for (std::size_t i = 0; i < prefix.size(); ++i) {
    char const c = text[i];
    if ((c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c) != prefix[i]) {
      return false;
    }
  }
  return true;
}

int hex_value(char c) noexcept {
  if (c >= '0' && c <= '9') {
    return c - '0';
  }
  if (c >= 'a' && c <= 'f') {
    return c - 'a' + 10;
  }
  if (c >= 'A' && c <= 'F') {
    return c - 'A' + 10;
  }
  return -1;
}

// Percent-decodes a user or password. The message names the part, never its text.
std::string decode(std::string_view text, std::string_view part) {
  std::string out;
  out.reserve(text.size());
  for (std::size_t i = 0; i < text.size(); ++i) {
    if (text[i] != '%') {
      out.push_back(text[i]);
      continue;
    }
    int const hi = i + 2 < text.size() ? hex_value(text[i + 1]) : -1;
    int const lo = i + 2 < text.size() ? hex_value(text[i + 2]) : -1;
    if (hi < 0 || lo < 0) {
      refuse("bad percent escape in the " + std::string(part));
    }
    out.push_back(static_cast<char>(hi * 16 + lo));
    i += 2;
  }
  return out;
}

// RFC 3986's unreserved characters: letters, digits and "-._~".
bool is_unreserved(char c) noexcept {
  return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '-' || c == '.' ||
         c == '_' || c == '~';
}

// Percent-encodes every byte but the unreserved ones of RFC 3986, so that `decode` reads the text back.
std::string encode(std::string_view text) {
  constexpr char digits[] = "0123456789ABCDEF";
  std::string out;
  for (char const c : text) {
    auto const b = static_cast<unsigned char>(c);
    if (is_unreserved(c)) {
      out.push_back(c);
    } else {
      out += {'%', digits[b >> 4], digits[b & 15]};
    }
  }
  return out;
}

std::optional<unsigned> to_number(std::string_view text, unsigned max) noexcept {
  unsigned value = 0;
  auto const [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (text.empty() || ec != std::errc{} || end != text.data() + text.size() || value > max) {
    return std::nullopt;
  }
  return value;
}

void read_credentials(std::string_view userinfo, redis_url& url) {
  auto const colon = userinfo.find(':');
  if (colon == std::string_view::npos) {
    url.password = decode(userinfo, "password"); // redis://secret@host: a password alone, as redis-cli reads it
    return;
  }
  url.user = decode(userinfo.substr(0, colon), "user");
  url.password = decode(userinfo.substr(colon + 1), "password");
}

// The host goes to the resolver and into log lines: a control character or a space is never part of a name, and
// an unbracketed ':' left after the port is split off is an IPv6 address whose port cannot be told apart. A name
// holds what RFC 3986 allows in one unescaped (letters, digits, "-._~" and "!$&'()*+,;="); an address in brackets
// hex digits, ':' and '.' (an IPv4 tail) only, so that `redacted_url` writes back a URL that reads the same.
void check_host(std::string_view host, bool bracketed) {
  if (host.empty()) {
    refuse("empty host");
  }
  for (char const c : host) {
    auto const byte = static_cast<unsigned char>(c);
    if (byte < 0x20 || byte == 0x7f || c == ' ') {
      refuse("the host has a control character or a space");
    }
  }
  if (bracketed) {
    for (char const c : host) {
      if (hex_value(c) < 0 && c != ':' && c != '.') {
        refuse("the host in brackets is not an IPv6 address (hex digits, ':' and '.' only; no zone)");
      }
    }
    // The characters alone let through "[:]" or "[1::2::3]": the system's own reader of IPv6 text decides.
    std::array<unsigned char, 16> address{};
    if (host.find(':') == std::string_view::npos || ::inet_pton(AF_INET6, std::string(host).c_str(), &address) != 1) {
      refuse("the host in brackets is not an IPv6 address");
    }
    return;
  }
  for (char const c : host) {
    if (!is_unreserved(c) && std::string_view("!$&'()*+,;=").find(c) == std::string_view::npos) { // sub-delims
      refuse("the host has a character a host name cannot hold (letters, digits and -._~!$&'()*+,;= only)");
    }
  }
}

void read_host_port(std::string_view hostport, redis_url& url) {
  std::optional<std::string_view> port_text; // set when the URL has a ':port' part, even an empty one
  if (hostport.starts_with('[')) {
    auto const close = hostport.find(']');
    if (close == std::string_view::npos) {
      refuse("unclosed '[' in the host");
    }
    url.host = std::string(hostport.substr(1, close - 1));
    auto const rest = hostport.substr(close + 1);
    if (!rest.empty() && !rest.starts_with(':')) {
      refuse("unexpected text after the IPv6 address");
    }
    if (!rest.empty()) {
      port_text = rest.substr(1);
    }
  } else {
    auto const colon = hostport.rfind(':');
    url.host = std::string(hostport.substr(0, colon));
    if (url.host.find(':') != std::string::npos) {
      refuse("an IPv6 address must be in brackets: redis://[::1]:6379");
    }
    if (colon != std::string_view::npos) {
      port_text = hostport.substr(colon + 1);
    }
  }
  check_host(url.host, hostport.starts_with('['));
  if (port_text) {
    auto const port = to_number(*port_text, 65535);
    if (!port || *port == 0) {
      refuse("port is not 1-65535");
    }
    url.port = static_cast<std::uint16_t>(*port);
  }
}

} // namespace

redis_url redis_url::parse(std::string_view text) {
  constexpr std::string_view scheme = "redis://";
  if (!starts_with_nocase(text, scheme)) { // RFC 3986 3.1: the scheme is case-insensitive
    refuse(starts_with_nocase(text, "rediss://") ? "rediss:// (TLS) is not supported by hiredis 0.14; use a TLS proxy"
                                                 : "the URL must start with redis://");
  }
  text.remove_prefix(scheme.size());
  redis_url url;
  auto const at = text.rfind('@');
  if (at != std::string_view::npos) {
    read_credentials(text.substr(0, at), url);
    text.remove_prefix(at + 1);
  }
  // After the credentials: a password may hold a ? or # that its writer did not escape.
  if (auto const extra = text.find_first_of("?#"); extra != std::string_view::npos) {
    refuse(text[extra] == '?' ? "a query string (?...) is not supported: give the db as the path, redis://host:port/db"
                              : "a fragment (#...) is not supported");
  }
  auto const slash = text.find('/');
  read_host_port(text.substr(0, slash), url);
  if (slash != std::string_view::npos && slash + 1 < text.size()) {
    auto const db = to_number(text.substr(slash + 1), 65535);
    if (!db) {
      refuse("db is not a number 0-65535");
    }
    url.db = static_cast<int>(*db);
  }
  return url;
}

std::string redis_url::redacted() const {
  bool const v6 = host.find(':') != std::string::npos;
  std::string out = v6 ? "[" + host + "]" : host;
  out += ':' + std::to_string(port);
  if (db != 0) {
    out += '/' + std::to_string(db);
  }
  return out;
}

std::string redis_url::redacted_url() const {
  std::string out = "redis://";
  if (!user.empty() || !password.empty()) {
    // `user:@` for a user without a password: `redis://user@host` would read the user as a password.
    out += encode(user) + (password.empty() ? ":@" : ":***@");
  }
  return out + redacted();
}

} // namespace wandura
