// Shared pieces of the `wandura` command line: its commands, connection and TLS settings, JSON text output.
// Not installed; used only by src/apps/*.cpp. The style of every command line (help, usage errors, exit statuses)
// is src/cli/style.hpp.
#pragma once

#include <cstddef>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

#include "cli/style.hpp"
#include "wandura/detail/printable.hpp"
#include "wandura/error.hpp"
#include "wandura/playback/client.hpp"

namespace wandura::cli {

/// One command of `wandura`: the subcommand its options were added to, and how to run it once they are parsed.
struct command {
  /// The subcommand, owned by the `wandura` application.
  CLI::App* app = nullptr;
  /// Runs the command with the parsed options; returns its exit status. @throws usage_error for a command line
  /// CLI11 accepted but the command refuses; @throws wandura::error when the SDK refused an argument.
  std::function<int()> run;
};

/// Where the API is, how to authenticate and which certificates to trust. Flags first, then the environment:
/// `--base-url` / `WANDURA_BASE_URL` (default the emulator's `http://127.0.0.1:8787`), `--api-key` /
/// `WANDURA_API_KEY`, `--ca-bundle` / `CURL_CA_BUNDLE` / `SSL_CERT_FILE` (default the system's CA bundle), and
/// `--insecure` (no certificate verification at all; a warning on stderr every run).
/// A flag given with an empty value is refused rather than read as "not given": `--base-url "$URL"` with `URL`
/// unset must not quietly reach another server.
struct connection {
  std::optional<std::string> base_url;
  std::optional<std::string> api_key;
  std::optional<std::string> ca_bundle;
  bool insecure = false;

  /// Adds `--base-url`, `--api-key`, `--ca-bundle` and `--insecure` to `app`, parsed into this object, which must
  /// outlive `app`'s parsing.
  void add_options(CLI::App& app);
  /// Client options with the flags, then the environment, applied; prints the `--insecure` warning on stderr.
  /// @throws usage_error when a flag is given an empty value, when no API key is given anywhere, when the key or
  ///         the base URL contains a control character other than tab, or DEL (`header_safe`: they would end up
  ///         in a request's header lines), or when the transport would refuse the CA bundle
  ///         (`detail::ca_bundle_refusal`: it cannot be opened, is not a regular file or holds no PEM certificate),
  ///         the message naming the flag or variable it came from.
  [[nodiscard]] client_options to_client_options() const;
  /// For a TLS failure, a line that names both of its causes: a certificate that failed verification (against
  /// which CA bundle, and how to trust a private CA) and a server that does not speak TLS at that address (check
  /// the URL's scheme and port), since `errc::tls_failed` does not tell them apart; with `--insecure`, only the
  /// second. Empty for any other error.
  [[nodiscard]] std::string tls_hint(wandura::error const& e) const;
};

/// True when `value` can be sent in an HTTP header line: it contains no control character other than tab, and no
/// DEL (`detail::find_forbidden_header_byte`). CR and LF would end the line early and let the rest be read as
/// headers of its own; the SDK refuses the same bytes.
[[nodiscard]] bool header_safe(std::string_view value) noexcept;

/// `interactive`, `background` or `standard`. @throws usage_error otherwise.
[[nodiscard]] retry_policy policy_from_name(std::string_view name);

/// `text` as a JSON string literal, quotes included: `"`, `\` and control characters escaped, other bytes as is.
/// Only the first `max_bytes` bytes of `text` are written, fewer by up to three when the cut would split a UTF-8
/// character; when it is longer, `...` follows them inside the quotes (as `detail::printable` marks a cut).
[[nodiscard]] std::string json_string(std::string_view text, std::size_t max_bytes = std::string_view::npos);

/// Writes one line per retry to stderr: `WARN retry 1/3 in 1042 ms: HTTP 503 code=...`.
void log_to_stderr(log_level level, std::string_view message);

/// What the server said about a failed call, as one line: `the server said: TEXT (reason=R, request_id=ID)`, each
/// part the server left out omitted; empty when it said none of them (no response, or a body without them). The
/// error code is not repeated: `e.what()` has it. Each part is quoted through `detail::printable`: the text's first
/// 4096 bytes (`whole_line`), the reason's and the request id's first 200 (`detail::max_quoted_bytes`).
[[nodiscard]] std::string server_said(wandura::error const& e);

/// Prints a failed SDK call: the message on stderr, then what the server said (`server_said`) and `hint` (when not
/// empty) as lines of their own, and with `json` an `{"error":{...}}` object on stdout, one line, which has the
/// server's `error_code`, `reason`, `server_message` and `request_id` too. Text the server chose is bounded in both as
/// `detail::printable` bounds it: the server's `error_code`, `reason` and `request_id` at their first 200 bytes
/// (`detail::max_quoted_bytes`), the message and the server's text at 4096 (`whole_line`), `...` marking a cut; in
/// the JSON it is escaped the JSON way.
void print_error(std::string_view command, wandura::error const& e, bool json, std::string_view hint = {});

/// The text of `wandura --version`: the project's version, then the libcurl and OpenSSL it runs with.
[[nodiscard]] std::string version_text();

} // namespace wandura::cli
