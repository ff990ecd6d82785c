#include "wandura/fleet/key_layout.hpp"

#include <array>
#include <charconv>
#include <cmath>

#include <openssl/evp.h>
#include <openssl/sha.h>

#include "wandura/error.hpp"

namespace wandura::fleet_keys {
namespace {

void append_field(std::string& out, std::string_view field) {
  std::array<char, 20> length{}; // any size_t in decimal
  out.append(length.data(), std::to_chars(length.data(), length.data() + length.size(), field.size()).ptr);
  out += ':';
  out += field;
}

/// The key prefix of `kind` in `org`'s hash tag, with room for `rest` more characters.
std::string prefix(std::string_view org, std::string_view kind, std::size_t rest = 0) {
  std::string key;
  key.reserve(org.size() + kind.size() + 12 + rest);
  key += "wandura:{";
  key += org;
  key += "}:";
  key += kind;
  key += ':';
  return key;
}

/// `value` as the shortest text that reads back as the same double: `30`, `0.5`, `1e+21`.
void append_number(std::string& out, double value) {
  std::array<char, 32> text{};
  // 32 characters hold any double's shortest form (at most 24): the conversion cannot run out of room.
  out.append(text.data(), std::to_chars(text.data(), text.data() + text.size(), value).ptr);
}

} // namespace

void check_org(std::string_view org) {
  bool ok = !org.empty() && org.size() <= 64;
  for (char c : org) {
    ok = ok && ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' || c == '_' ||
                c == '-');
  }
  if (!ok) {
    throw error(errc::invalid_argument, "fleet: organisation must be 1-64 characters of [A-Za-z0-9._-]");
  }
}

std::string ticket(std::string_view org, ticket_identity const& who) {
  // Sized once: built field by field, the identity and the key each grew through several allocations, and this
  // runs for every key a Redis lookup or store names.
  std::string identity;
  identity.reserve(who.viewer_ref.size() + who.union_info.size() + who.film_ref.size() + who.intent.size() + 64);
  append_field(identity, who.viewer_ref);
  append_field(identity, who.union_info);
  append_field(identity, who.film_ref);
  append_field(identity, std::to_string(who.episode_no));
  append_field(identity, who.intent);
  std::array<unsigned char, SHA256_DIGEST_LENGTH> digest{};
  // Fetched once: OpenSSL 3's one-shot SHA256() fetches the algorithm, under a lock, on every call (that was 12 %
  // of a Redis-backed playback benchmark's instructions, three keys per call).
  static EVP_MD* const md = EVP_MD_fetch(nullptr, "SHA256", nullptr);
  if (md == nullptr || EVP_Digest(identity.data(), identity.size(), digest.data(), nullptr, md, nullptr) != 1) {
    SHA256(reinterpret_cast<unsigned char const*>(identity.data()), identity.size(), digest.data());
  }
  std::string key = prefix(org, "ticket", 32);
  constexpr std::string_view hex = "0123456789abcdef";
  for (std::size_t i = 0; i < 16; ++i) {
    key.push_back(hex[digest[i] >> 4U]);
    key.push_back(hex[digest[i] & 0x0FU]);
  }
  return key;
}

std::string viewer(std::string_view org, viewer_rate rate, std::string_view viewer_ref) {
  bool const valid = std::isfinite(rate.tickets_per_minute) && rate.tickets_per_minute > 0 &&
                     std::isfinite(rate.burst) && rate.burst > 0;
  if (!valid) {
    throw error(errc::invalid_argument, "fleet: a viewer limit's rate and burst must be finite and > 0");
  }
  std::string key = prefix(org, "viewer");
  append_number(key, rate.tickets_per_minute);
  key += "pm-b";
  append_number(key, rate.burst);
  key += ':';
  key += viewer_ref;
  return key;
}

std::string ticket_erasures(std::string_view org) {
  auto channel = prefix(org, "ticket-erased");
  channel.pop_back(); // a channel, not a key prefix: no trailing ':'
  return channel;
}

std::string pace(std::string_view org, std::string_view counter) {
  return prefix(org, "pace") += counter;
}

} // namespace wandura::fleet_keys
