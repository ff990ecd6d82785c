#include "apps/cli.hpp"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <optional>

#include <curl/curl.h>
#include <openssl/crypto.h>

#include "wandura/detail/ca_bundle.hpp"
#include "wandura/detail/header_value.hpp"

#ifndef WANDURA_VERSION
#error "WANDURA_VERSION (the project's version) is set by src/apps/CMakeLists.txt"
#endif

namespace wandura::cli {

namespace {

std::optional<std::string> from_env(char const* name) {
  char const* v = std::getenv(name);
  if (v == nullptr || *v == '\0') {
    return std::nullopt;
  }
  return std::string(v);
}

/// The CA bundle to trust and where it was named: the flag, else CURL_CA_BUNDLE, else SSL_CERT_FILE (the order
/// of the curl tool); nullopt for the system's default bundle.
std::optional<std::pair<std::string, std::string>> ca_bundle_source(std::optional<std::string> const& flag) {
  if (flag) {
    return std::pair{*flag, std::string("--ca-bundle")};
  }
  for (char const* name : {"CURL_CA_BUNDLE", "SSL_CERT_FILE"}) {
    if (auto path = from_env(name)) {
      return std::pair{std::move(*path), std::string(name)};
    }
  }
  return std::nullopt;
}

/// Whether `base_url` is https:// (its scheme case-insensitively; the client checks the rest).
bool uses_tls(std::string_view base_url) noexcept {
  constexpr std::string_view https = "https:";
  return base_url.size() >= https.size() &&
         std::equal(https.begin(), https.end(), base_url.begin(),
                    [](char a, char b) { return a == (b >= 'A' && b <= 'Z' ? static_cast<char>(b - 'A' + 'a') : b); });
}

/// Refuses a flag given as an empty string.
void refuse_empty(std::optional<std::string> const& flag, std::string_view name, std::string_view otherwise) {
  if (flag && flag->empty()) {
    throw usage_error(std::string(name) + ": must not be empty (leave it out for " + std::string(otherwise) + ")");
  }
}

} // namespace

void connection::add_options(CLI::App& app) {
  app.add_option("--base-url", base_url, "the API (default $WANDURA_BASE_URL, else http://127.0.0.1:8787)")
      ->type_name("URL");
  app.add_option("--api-key", api_key, "the API key (default $WANDURA_API_KEY)")->type_name("KEY");
  app.add_option("--ca-bundle", ca_bundle,
                 "PEM file of the CA certificates to trust for https://\n(default $CURL_CA_BUNDLE, else "
                 "$SSL_CERT_FILE, else the system's)")
      ->type_name("FILE");
  app.add_flag("--insecure", insecure,
               "do not verify the server's certificate or host name\n(for tests only; warns on every run)");
}

client_options connection::to_client_options() const {
  refuse_empty(base_url, "--base-url", "$WANDURA_BASE_URL or the default");
  refuse_empty(api_key, "--api-key", "$WANDURA_API_KEY");
  refuse_empty(ca_bundle, "--ca-bundle", "$CURL_CA_BUNDLE, $SSL_CERT_FILE or the system's");
  client_options o;
  if (auto url = base_url ? base_url : from_env("WANDURA_BASE_URL")) {
    o.base_url = std::move(*url);
  }
  if (!header_safe(o.base_url)) {
    throw usage_error("the base URL must not contain control characters");
  }
  auto key = api_key ? api_key : from_env("WANDURA_API_KEY");
  if (!key) {
    throw usage_error("no API key: pass --api-key KEY or set WANDURA_API_KEY");
  }
  if (!header_safe(*key)) {
    // Checked here, before any client exists: such a key would add header lines of its own to every request.
    throw usage_error("the API key must not contain control characters (bytes 0x00-0x1F other than tab, or 0x7F: "
                      "it is sent in the Authorization header); nothing was sent");
  }
  o.api_key = std::move(*key);
  if (insecure && ca_bundle) {
    throw usage_error("give either --ca-bundle or --insecure, not both");
  }
  if (insecure) {
    o.transport.verify_peer = false;
    o.transport.verify_host = false;
    std::fputs("WARNING: --insecure: the server's certificate and host name are NOT verified; anyone on the "
               "network path can read and change this traffic, the API key included\n",
               stderr);
  } else if (auto ca = ca_bundle_source(ca_bundle); ca && (ca_bundle || uses_tls(o.base_url))) {
    // The transport's own check, asked here to say where the path came from. A bundle named by the environment only
    // for https://: a variable set machine-wide must not stop a plain-HTTP run (as with curl).
    if (auto why = detail::ca_bundle_refusal(ca->first); !why.empty()) {
      throw usage_error(ca->second + ": the CA bundle " + why);
    }
    o.transport.ca_bundle = std::move(ca->first);
  }
  o.retry.log = log_to_stderr;
  return o;
}

std::string connection::tls_hint(wandura::error const& e) const {
  if (e.code() != errc::tls_failed) {
    return {};
  }
  // tls_failed covers a certificate that failed verification and a handshake that never got that far (https:// to
  // a port that speaks plain HTTP); the error does not tell them apart, so the hint names both.
  constexpr std::string_view not_tls =
      "the server does not speak TLS at that address (check the URL's scheme and port)";
  if (insecure) {
    return "hint: certificates were not verified (--insecure), so the TLS handshake itself failed: perhaps " +
           std::string(not_tls);
  }
  auto const ca = ca_bundle_source(ca_bundle);
  std::string const trusted =
      ca ? "the CA bundle " + ca->first + " (from " + ca->second + ")" : "the system's CA bundle";
  return "hint: either the server's certificate failed verification against " + trusted +
         " (for a certificate from a private CA, pass --ca-bundle FILE; it must also name the URL's host), or " +
         std::string(not_tls);
}

bool header_safe(std::string_view value) noexcept {
  return !detail::find_forbidden_header_byte(value);
}

retry_policy policy_from_name(std::string_view name) {
  if (name == "interactive") {
    return retry_policy::interactive();
  }
  if (name == "background") {
    return retry_policy::background();
  }
  if (name == "standard") {
    return retry_policy::standard();
  }
  throw usage_error("--policy: expected interactive, background or standard, got \"" + std::string(name) + "\"");
}

std::string json_string(std::string_view text, std::size_t max_bytes) {
  bool const cut = text.size() > max_bytes;
  if (cut) {
    // Back to the start of a UTF-8 character cut in two (at most three continuation bytes), so that the JSON text
    // stays valid UTF-8 when the server's was.
    std::size_t end = max_bytes;
    for (int back = 0; back < 3 && end > 0 && (static_cast<unsigned char>(text[end]) & 0xC0U) == 0x80U; ++back) {
      --end;
    }
    text = text.substr(0, end);
  }
  std::string out;
  out.reserve(text.size() + 5);
  out.push_back('"');
  for (char const c : text) {
    switch (c) {
    case '"': out += "\\\""; break;
    case '\\': out += "\\\\"; break;
    case '\n': out += "\\n"; break;
    case '\r': out += "\\r"; break;
    case '\t': out += "\\t"; break;
    default:
      if (static_cast<unsigned char>(c) < 0x20) {
        char buf[8];
        std::snprintf(buf, sizeof buf, "\\u%04x", static_cast<unsigned>(static_cast<unsigned char>(c)));
        out += buf;
      } else {
        out.push_back(c);
      }
    }
  }
  if (cut) {
    out.append("...");
  }
  out.push_back('"');
  return out;
}

void log_to_stderr(log_level level, std::string_view message) {
  char const* name = level == log_level::warn    ? "WARN"
                     : level == log_level::error ? "ERROR"
                     : level == log_level::info  ? "INFO"
                                                 : "DEBUG";
  // One write per line, so that lines from several threads never interleave.
  std::string line = std::string(name) + " " + detail::printable(message, whole_line) + "\n";
  std::fwrite(line.data(), 1, line.size(), stderr);
}

std::string server_said(wandura::error const& e) {
  std::string extra;
  for (auto const& [name, value] : {std::pair{"reason=", &e.reason()}, std::pair{"request_id=", &e.request_id()}}) {
    if (!value->empty()) {
      extra.append(extra.empty() ? "" : ", ").append(name);
      detail::append_printable(extra, *value);
    }
  }
  if (e.server_message().empty() && extra.empty()) {
    return {};
  }
  std::string line = "the server said:";
  if (!e.server_message().empty()) {
    line += ' ';
    detail::append_printable(line, e.server_message(), whole_line);
  }
  if (!extra.empty()) {
    line += " (" + extra + ")";
  }
  return line;
}

void print_error(std::string_view command, wandura::error const& e, bool json, std::string_view hint) {
  std::fprintf(stderr, "wandura %.*s: %s\n", static_cast<int>(command.size()), command.data(),
               detail::printable(e.what(), whole_line).c_str());
  if (auto const said = server_said(e); !said.empty()) {
    std::fprintf(stderr, "wandura %.*s: %s\n", static_cast<int>(command.size()), command.data(), said.c_str());
  }
  if (!hint.empty()) {
    std::fprintf(stderr, "%.*s\n", static_cast<int>(hint.size()), hint.data());
  }
  if (json) {
    // The server's text bounded as on stderr: its codes' first 200 bytes, the messages' first 4096.
    std::string out = "{\"error\":{\"message\":" + json_string(e.what(), whole_line) +
                      ",\"code\":" + json_string(e.code().message()) +
                      ",\"http_status\":" + std::to_string(e.http_status()) +
                      ",\"error_code\":" + json_string(e.server_error_code(), detail::max_quoted_bytes) +
                      ",\"reason\":" + json_string(e.reason(), detail::max_quoted_bytes) +
                      ",\"server_message\":" + json_string(e.server_message(), whole_line) +
                      ",\"request_id\":" + json_string(e.request_id(), detail::max_quoted_bytes) +
                      ",\"attempts\":" + std::to_string(e.attempts()) + "}}\n";
    std::fwrite(out.data(), 1, out.size(), stdout);
  }
}

std::string version_text() {
  curl_version_info_data const* curl = curl_version_info(CURLVERSION_NOW);
  std::string text = std::string("wandura ") + WANDURA_VERSION + "\nlibcurl " + curl->version;
  if (curl->ssl_version != nullptr) {
    text += std::string(" (") + curl->ssl_version + ")";
  }
  text += std::string("\n") + OpenSSL_version(OPENSSL_VERSION);
  return text;
}

} // namespace wandura::cli
