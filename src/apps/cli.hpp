// Shared pieces of the `wandura` command line: argument reading, connection settings, JSON text output.
// Not installed; used only by src/apps/*.cpp.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>

#include "wandura/playback/client.hpp"

namespace wandura::cli {

/// A command line the command cannot run: printed with the command's usage, exit status 2.
struct usage_error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

/// Exit statuses of every command.
inline constexpr int exit_ok = 0;
inline constexpr int exit_failed = 1;
inline constexpr int exit_usage = 2;

/// Walks `args` flag by flag. Flags take their value from the next argument (`--film REF`) or after `=`
/// (`--film=REF`).
class arg_reader {
public:
  explicit arg_reader(std::span<char* const> args) : args_(args) {}

  /// Moves to the next flag; false when there is none left. A bare argument (not starting with "--") is a usage
  /// error, except "-h".
  bool next();
  /// The current flag without its value, e.g. "--film".
  [[nodiscard]] std::string const& flag() const noexcept { return flag_; }
  /// The current flag's value. @throws usage_error when it has none.
  std::string value();
  /// The value as a whole number in [lo, hi]. @throws usage_error otherwise.
  std::int64_t integer(std::int64_t lo, std::int64_t hi);
  /// @throws usage_error "unknown option".
  [[noreturn]] void unknown() const;

private:
  std::span<char* const> args_;
  std::size_t index_ = 0;
  std::string flag_;
  std::optional<std::string> inline_value_;
};

/// Where the API is and how to authenticate: `--base-url`/`--api-key`, else `WANDURA_BASE_URL`/`WANDURA_API_KEY`.
struct connection {
  std::optional<std::string> base_url;
  std::optional<std::string> api_key;

  /// Reads `--base-url` or `--api-key` if `r` is at one; returns whether it was.
  bool read(arg_reader& r);
  /// Client options with the flags, then the environment, applied. The base URL defaults to the emulator's
  /// `http://127.0.0.1:8787`. @throws usage_error when no API key is given anywhere.
  [[nodiscard]] client_options to_client_options() const;
};

/// `interactive`, `background` or `standard`. @throws usage_error otherwise.
[[nodiscard]] retry_policy policy_from_name(std::string_view name);

/// `text` as a JSON string literal, quotes included: `"`, `\` and control characters escaped, other bytes as is.
[[nodiscard]] std::string json_string(std::string_view text);

/// Writes one WARN line per retry to stderr (SPEC §3: `WARN retry 1/3 in 1042 ms: HTTP 503 code=...`).
void log_to_stderr(log_level level, std::string_view message);

/// Prints a failed SDK call: the message on stderr, and with `json` an `{"error":{...}}` object on stdout.
void print_error(std::string_view command, wandura::error const& e, bool json);

} // namespace wandura::cli
