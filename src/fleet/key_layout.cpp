#include "wandura/fleet/key_layout.hpp"

#include <array>
#include <charconv>
#include <cmath>
#include <memory>
#include <string>

#include <openssl/evp.h>
#include <openssl/sha.h>

#include "known_keys.hpp"
#include "wandura/error.hpp"

namespace wandura {
namespace detail {
namespace {

void append_field(std::string& out, std::string_view field) {
  std::array<char, 20> length{}; // any size_t in decimal
  out.append(length.data(), std::to_chars(length.data(), length.data() + length.size(), field.size()).ptr);
  out += ':';
  out += field;
}

/// SHA-256 over the length-prefixed fields of an identity: what a ticket key's hex is made of.
std::array<unsigned char, SHA256_DIGEST_LENGTH> ticket_digest(std::string_view viewer_ref, std::string_view union_info,
                                                              std::string_view film_ref, int episode_no,
                                                              std::string_view intent) {
  // Built in this thread's buffer and hashed with this thread's context: this runs for every key a Redis lookup or
  // store names (twice for a ticket that was missed, then stored), and a new string and a new digest context each
  // time were two allocations of every one.
  thread_local std::string identity;
  thread_local std::unique_ptr<EVP_MD_CTX, decltype(&EVP_MD_CTX_free)> const context(EVP_MD_CTX_new(),
                                                                                     &EVP_MD_CTX_free);
  std::array<char, 12> episode{}; // any int in decimal
  auto const episode_end = std::to_chars(episode.data(), episode.data() + episode.size(), episode_no).ptr;
  identity.clear();
  identity.reserve(viewer_ref.size() + union_info.size() + film_ref.size() + intent.size() + 64);
  append_field(identity, viewer_ref);
  append_field(identity, union_info);
  append_field(identity, film_ref);
  append_field(identity, std::string_view(episode.data(), static_cast<std::size_t>(episode_end - episode.data())));
  append_field(identity, intent);
  std::array<unsigned char, SHA256_DIGEST_LENGTH> digest{};
  // Fetched once: OpenSSL 3's one-shot SHA256() fetches the algorithm, under a lock, on every call (that was 12 %
  // of a Redis-backed playback benchmark's instructions, three keys per call).
  static EVP_MD* const md = EVP_MD_fetch(nullptr, "SHA256", nullptr);
  bool const hashed = md != nullptr && context != nullptr && EVP_DigestInit_ex2(context.get(), md, nullptr) == 1 &&
                      EVP_DigestUpdate(context.get(), identity.data(), identity.size()) == 1 &&
                      EVP_DigestFinal_ex(context.get(), digest.data(), nullptr) == 1;
  if (!hashed) {
    SHA256(reinterpret_cast<unsigned char const*>(identity.data()), identity.size(), digest.data());
  }
  if (identity.capacity() > 4096) {
    std::string().swap(identity); // an unusually long identity's buffer is not kept for the thread's life
  }
  return digest;
}

} // namespace

ticket_key_id ticket_key_id_for(std::string_view viewer_ref, std::string_view union_info, std::string_view film_ref,
                                int episode_no, std::string_view intent) {
  auto const digest = ticket_digest(viewer_ref, union_info, film_ref, episode_no, intent);
  ticket_key_id id = 0;
  for (std::size_t i = 0; i < sizeof(ticket_key_id); ++i) {
    id = (id << 8U) | digest[i];
  }
  return id;
}

} // namespace detail

namespace fleet_keys {
namespace {

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
  return detail::ticket_key_with_id(org, who).key;
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

std::string ticket_erasures(std::string_view org, int db) {
  auto channel = prefix(org, "ticket-erased");
  channel.pop_back(); // a channel, not a key prefix: no trailing ':'
  if (db != 0) {
    channel += '@' + std::to_string(db);
  }
  return channel;
}

std::string pace(std::string_view org, std::string_view counter) {
  return prefix(org, "pace") += counter;
}

} // namespace fleet_keys

namespace detail {

ticket_key_and_id ticket_key_with_id(std::string_view org, ticket_identity const& who) {
  auto const digest = ticket_digest(who.viewer_ref, who.union_info, who.film_ref, who.episode_no, who.intent);
  ticket_key_and_id out{fleet_keys::prefix(org, "ticket", 32), 0};
  constexpr std::string_view hex = "0123456789abcdef";
  for (std::size_t i = 0; i < 16; ++i) {
    out.key.push_back(hex[digest[i] >> 4U]);
    out.key.push_back(hex[digest[i] & 0x0FU]);
    if (i < sizeof(ticket_key_id)) {
      out.id = (out.id << 8U) | digest[i];
    }
  }
  return out;
}

} // namespace detail
} // namespace wandura
