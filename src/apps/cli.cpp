#include "apps/cli.hpp"

#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <iostream>

namespace wandura::cli {

bool arg_reader::next() {
  inline_value_.reset();
  if (index_ >= args_.size()) {
    return false;
  }
  std::string arg = args_[index_++];
  if (arg == "-h") {
    arg = "--help";
  }
  if (arg.size() < 3 || arg.compare(0, 2, "--") != 0) {
    throw usage_error("unexpected argument \"" + arg + "\"");
  }
  if (auto eq = arg.find('='); eq != std::string::npos) {
    inline_value_ = arg.substr(eq + 1);
    arg.resize(eq);
  }
  flag_ = std::move(arg);
  return true;
}

std::string arg_reader::value() {
  if (inline_value_) {
    auto v = std::move(*inline_value_);
    inline_value_.reset();
    return v;
  }
  if (index_ >= args_.size()) {
    throw usage_error(flag_ + ": missing value");
  }
  return args_[index_++];
}

std::int64_t arg_reader::integer(std::int64_t lo, std::int64_t hi) {
  auto const text = value();
  std::int64_t v = 0;
  auto const* end = text.data() + text.size();
  auto [ptr, ec] = std::from_chars(text.data(), end, v);
  if (text.empty() || ec != std::errc{} || ptr != end || v < lo || v > hi) {
    throw usage_error(flag_ + ": expected a whole number from " + std::to_string(lo) + " to " + std::to_string(hi) +
                      ", got \"" + text + "\"");
  }
  return v;
}

void arg_reader::unknown() const {
  throw usage_error("unknown option \"" + flag_ + "\"");
}

bool connection::read(arg_reader& r) {
  if (r.flag() == "--base-url") {
    base_url = r.value();
    return true;
  }
  if (r.flag() == "--api-key") {
    api_key = r.value();
    return true;
  }
  return false;
}

client_options connection::to_client_options() const {
  auto env = [](char const* name) -> std::optional<std::string> {
    char const* v = std::getenv(name);
    if (v == nullptr || *v == '\0') {
      return std::nullopt;
    }
    return std::string(v);
  };
  client_options o;
  o.base_url = base_url ? *base_url : env("WANDURA_BASE_URL").value_or("http://127.0.0.1:8787");
  auto key = api_key ? api_key : env("WANDURA_API_KEY");
  if (!key || key->empty()) {
    throw usage_error("no API key: pass --api-key KEY or set WANDURA_API_KEY");
  }
  o.api_key = std::move(*key);
  o.retry.log = log_to_stderr;
  return o;
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

std::string json_string(std::string_view text) {
  std::string out;
  out.reserve(text.size() + 2);
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
  out.push_back('"');
  return out;
}

void log_to_stderr(log_level level, std::string_view message) {
  char const* name = level == log_level::warn    ? "WARN"
                     : level == log_level::error ? "ERROR"
                     : level == log_level::info  ? "INFO"
                                                 : "DEBUG";
  // One write per line, so that lines from several threads never interleave.
  std::string line = std::string(name) + " " + std::string(message) + "\n";
  std::fwrite(line.data(), 1, line.size(), stderr);
}

void print_error(std::string_view command, wandura::error const& e, bool json) {
  std::fprintf(stderr, "wandura %.*s: %s\n", static_cast<int>(command.size()), command.data(), e.what());
  if (json) {
    std::string out = "{\"error\":{\"message\":" + json_string(e.what()) +
                      ",\"code\":" + json_string(e.code().message()) +
                      ",\"http_status\":" + std::to_string(e.http_status()) +
                      ",\"error_code\":" + json_string(e.server_error_code()) +
                      ",\"attempts\":" + std::to_string(e.attempts()) + "}}\n";
    std::fwrite(out.data(), 1, out.size(), stdout);
  }
}

} // namespace wandura::cli
