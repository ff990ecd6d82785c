#include "apps/cli.hpp"

#include <cstdlib>
#include <vector>

#include <catch2/catch.hpp>

#include "test_ca_certificate.hpp"
#include "wandura/detail/printable.hpp"

namespace {

// argv-style storage for the parser.
struct argv_of {
  std::vector<std::string> text;
  std::vector<char*> ptrs;
  explicit argv_of(std::vector<std::string> args) : text(std::move(args)) {
    for (auto& s : text) {
      ptrs.push_back(s.data());
    }
  }
  [[nodiscard]] std::span<char* const> span() const { return {ptrs.data(), ptrs.size()}; }
};

/// An application with one option `--n` checked by number_in<T>(lo, hi); returns the exit status of parsing
/// `value` (nullopt: accepted) and the value read.
template <typename T> std::pair<std::optional<int>, T> parse_number(std::string value, T lo, T hi) {
  CLI::App app("test", "test");
  wandura::cli::apply_style(app, "");
  T n{};
  app.add_option("--n", n)->transform(wandura::cli::number_in<T>(lo, hi));
  argv_of a({"--n", std::move(value)});
  auto const done = wandura::cli::parse(app, a.span());
  return {done, n};
}

} // namespace

TEST_CASE("cli numbers: plain decimal digits in range are read, in base 10") {
  CHECK(parse_number<std::int32_t>("4", 1, 10) == std::pair<std::optional<int>, std::int32_t>{std::nullopt, 4});
  CHECK(parse_number<std::int32_t>("010", 1, 10).second == 10); // never octal
  CHECK(parse_number<std::uint16_t>("000", 0, 65535) == std::pair<std::optional<int>, std::uint16_t>{std::nullopt, 0});
  CHECK(parse_number<std::uint64_t>("18446744073709551615", 0, UINT64_MAX).second == UINT64_MAX);
  CHECK(parse_number<double>("0.25", 0, 1).second == 0.25);
}

TEST_CASE("cli numbers: anything else is a usage error, exit status 2") {
  for (auto const* bad : {"0", "11", "4x", "", "-1", " 4", "+4", "0x4", "4.0"}) {
    CAPTURE(bad);
    CHECK(parse_number<std::int32_t>(bad, 1, 10).first == wandura::cli::exit_usage);
  }
  for (auto const* bad : {"nan", "inf", "1e-1", "1.5", ".", "0..1", "-0.5"}) {
    CAPTURE(bad);
    CHECK(parse_number<double>(bad, 0, 1).first == wandura::cli::exit_usage);
  }
}

TEST_CASE("cli numbers: a value past what the type holds is a usage error, never clamped to its maximum") {
  for (auto const* bad : {"18446744073709551616", "99999999999999999999999", "184467440737095516150"}) {
    CAPTURE(bad);
    CHECK(parse_number<std::uint64_t>(bad, 0, UINT64_MAX).first == wandura::cli::exit_usage);
  }
  CHECK(parse_number<std::int32_t>("2147483648", 1, 2147483647).first == wandura::cli::exit_usage);
  CHECK(parse_number<unsigned>("4294967297", 1, 256).first == wandura::cli::exit_usage);
  CHECK(parse_number<std::uint16_t>("65536", 0, 65535).first == wandura::cli::exit_usage);
  CHECK(parse_number<std::uint64_t>("00018446744073709551615", 0, UINT64_MAX).second == UINT64_MAX);
}

TEST_CASE("cli parsing: values after a space or '=', the last of a repeated option counts, --help exits 0") {
  CLI::App app("test", "test");
  wandura::cli::apply_style(app, "");
  std::string film;
  std::string policy;
  app.add_option("--film", film);
  app.add_option("--policy", policy);
  argv_of a({"--film", "the-heiress-returns", "--policy=background", "--policy", "standard"});
  CHECK_FALSE(wandura::cli::parse(app, a.span()));
  CHECK(film == "the-heiress-returns");
  CHECK(policy == "standard");

  argv_of help({"-h"});
  CHECK(wandura::cli::parse(app, help.span()) == wandura::cli::exit_ok);
  argv_of bare({"tickets"});
  CHECK(wandura::cli::parse(app, bare.span()) == wandura::cli::exit_usage);
}

namespace {

/// A `tickets` command of four options (one with a range, one flag), every value option refusing another option's
/// name as its value.
struct tickets_app {
  CLI::App app{"test", "test"};
  std::string key;
  std::string film;
  int episode = 0;
  bool json = false;
  tickets_app() {
    wandura::cli::apply_style(app, "");
    auto* tickets = app.add_subcommand("tickets", "");
    tickets->add_option("--api-key", key);
    tickets->add_option("--film", film);
    tickets->add_option("--episode", episode)->transform(wandura::cli::number_in<int>(1, 100));
    tickets->add_flag("--json", json);
    wandura::cli::refuse_options_as_values(app);
  }
};

} // namespace

TEST_CASE("cli parsing: an option whose value is left out does not take the next option as its value") {
  for (auto const& args : std::vector<std::vector<std::string>>{{"tickets", "--api-key", "--json"},
                                                                {"tickets", "--film", "--episode=1"},
                                                                {"tickets", "--film", "--episode", "1"},
                                                                {"tickets", "--api-key", "-h", "--film", "f"},
                                                                {"tickets", "--episode", "--api-key=SECRET"}}) {
    INFO(args[1] << " " << args[2]);
    tickets_app t;
    argv_of a(args);
    CHECK(wandura::cli::parse(t.app, a.span()) == wandura::cli::exit_usage);
    CHECK(t.key.empty());
    // The message names the option, not the value taken (which may be the next option's secret): checked before
    // the option's own range.
    tickets_app direct;
    std::vector<std::string> reversed(args.rbegin(), args.rend());
    CHECK_THROWS_WITH(direct.app.parse(reversed), Catch::Contains(args[1] + ": value missing: got the option ") &&
                                                      Catch::Contains(args[2].substr(0, args[2].find('='))) &&
                                                      !Catch::Contains("SECRET"));
  }
  // A value that only starts with a dash, and flags, are as before.
  tickets_app t;
  argv_of fine({"tickets", "--api-key", "-k3y", "--film", "--x", "--episode", "2", "--json"});
  CHECK_FALSE(wandura::cli::parse(t.app, fine.span()));
  CHECK(t.key == "-k3y");
  CHECK(t.film == "--x");
  CHECK(t.episode == 2);
  CHECK(t.json);
}

TEST_CASE("cli policies: the three presets by name, anything else refused") {
  CHECK(wandura::cli::policy_from_name("interactive") == wandura::retry_policy::interactive());
  CHECK(wandura::cli::policy_from_name("background") == wandura::retry_policy::background());
  CHECK(wandura::cli::policy_from_name("standard") == wandura::retry_policy::standard());
  CHECK_THROWS_AS(wandura::cli::policy_from_name("Interactive"), wandura::cli::usage_error);
}

TEST_CASE("cli connection: flags win over the environment, the key is required") {
  ::setenv("WANDURA_BASE_URL", "http://127.0.0.1:9999", 1);
  ::setenv("WANDURA_API_KEY", "env-key", 1);
  wandura::cli::connection from_env;
  auto o = from_env.to_client_options();
  CHECK(o.base_url == "http://127.0.0.1:9999");
  CHECK(o.api_key == "env-key");
  CHECK(o.retry.log); // WARN lines go to stderr

  CLI::App app("test", "test");
  wandura::cli::connection from_flags;
  from_flags.add_options(app);
  argv_of a({"--base-url", "http://127.0.0.1:1234", "--api-key", "flag-key"});
  REQUIRE_FALSE(wandura::cli::parse(app, a.span()));
  o = from_flags.to_client_options();
  CHECK(o.base_url == "http://127.0.0.1:1234");
  CHECK(o.api_key == "flag-key");

  ::unsetenv("WANDURA_API_KEY");
  ::unsetenv("WANDURA_BASE_URL");
  wandura::cli::connection none;
  CHECK_THROWS_AS(none.to_client_options(), wandura::cli::usage_error);
  wandura::cli::connection key_only;
  key_only.api_key = "k";
  CHECK(key_only.to_client_options().base_url == "http://127.0.0.1:8787");
}

TEST_CASE("cli connection: a key or base URL with a control byte is refused before any client exists") {
  for (std::string const& key : {std::string("k\r\nX: 1"), std::string("k\nX: 1"), std::string("k\0X", 3),
                                 std::string("k\x01X"), std::string("k\x7fX")}) {
    wandura::cli::connection c;
    c.api_key = key;
    CHECK_THROWS_WITH(c.to_client_options(), Catch::Contains("control character"));
  }
  wandura::cli::connection tab;
  tab.api_key = "k\tcaf\xc3\xa9";
  CHECK_NOTHROW(tab.to_client_options());
  wandura::cli::connection url;
  url.api_key = "k";
  url.base_url = "http://127.0.0.1:1/\r\nX: 1";
  CHECK_THROWS_AS(url.to_client_options(), wandura::cli::usage_error);
  CHECK(wandura::cli::header_safe("Bearer visible-ascii_key.0"));
  CHECK_FALSE(wandura::cli::header_safe("Bearer k\x1b[2J"));
}

TEST_CASE("cli connection: the CA bundle comes from --ca-bundle, else CURL_CA_BUNDLE, else SSL_CERT_FILE") {
  test_support::scratch_directory const dir("wandura-cli-ca");
  std::string const readable = dir.write("ca.pem", test_support::test_ca_pem);
  ::unsetenv("CURL_CA_BUNDLE");
  ::unsetenv("SSL_CERT_FILE");
  wandura::cli::connection c;
  c.api_key = "k";
  c.base_url = "HTTPS://api.wandura.example";
  CHECK(c.to_client_options().transport.ca_bundle.empty()); // the system's bundle
  CHECK(c.to_client_options().transport.verify_peer);

  ::setenv("SSL_CERT_FILE", readable.c_str(), 1);
  CHECK(c.to_client_options().transport.ca_bundle == readable);
  ::setenv("CURL_CA_BUNDLE", "/nonexistent/ca.pem", 1);
  CHECK_THROWS_WITH(c.to_client_options(),
                    Catch::StartsWith(R"(CURL_CA_BUNDLE: the CA bundle "/nonexistent/ca.pem": cannot be opened)"));
  c.ca_bundle = readable;
  CHECK(c.to_client_options().transport.ca_bundle == readable);
  // For plain HTTP the environment's bundle is not read (a variable set machine-wide must not stop such a run);
  // the flag still is.
  c.base_url = "http://127.0.0.1:8787";
  c.ca_bundle.reset();
  CHECK(c.to_client_options().transport.ca_bundle.empty());
  c.ca_bundle = "/nonexistent/ca.pem";
  CHECK_THROWS_WITH(c.to_client_options(), Catch::StartsWith("--ca-bundle: the CA bundle"));
  ::unsetenv("CURL_CA_BUNDLE");
  ::unsetenv("SSL_CERT_FILE");

  // The transport's check, named by where the path came from: a directory (of certificates, say) is not a bundle,
  // nor is a file without a certificate.
  // (The messages quote paths as detail::printable writes them.)
  auto const quoted = [](std::string const& path) {
    return "the CA bundle \"" + wandura::detail::printable(path) + "\"";
  };
  std::string const directory = dir.path().string();
  std::string const no_certificate = dir.write("no-certificate.pem", "not a certificate\n");
  wandura::cli::connection other;
  other.api_key = "k";
  other.base_url = "https://api.wandura.example";
  other.ca_bundle = directory;
  CHECK_THROWS_WITH(other.to_client_options(),
                    Catch::StartsWith("--ca-bundle: " + quoted(directory) + ": is a directory; give one PEM file"));
  other.ca_bundle = no_certificate;
  CHECK_THROWS_WITH(other.to_client_options(),
                    Catch::Equals("--ca-bundle: " + quoted(no_certificate) + ": holds no PEM certificate"));
  other.ca_bundle.reset();
  ::setenv("SSL_CERT_FILE", (directory + "/").c_str(), 1);
  CHECK_THROWS_WITH(other.to_client_options(),
                    Catch::StartsWith("SSL_CERT_FILE: " + quoted(directory + "/") + ": is a directory"));
  ::unsetenv("SSL_CERT_FILE");

  wandura::cli::connection insecure;
  insecure.api_key = "k";
  insecure.insecure = true;
  auto const o = insecure.to_client_options();
  CHECK_FALSE(o.transport.verify_peer);
  CHECK_FALSE(o.transport.verify_host);
  insecure.ca_bundle = readable;
  CHECK_THROWS_AS(insecure.to_client_options(), wandura::cli::usage_error);
}

TEST_CASE("cli version: names the project's version, libcurl and OpenSSL") {
  auto const text = wandura::cli::version_text();
  CHECK_THAT(text, Catch::StartsWith("wandura " WANDURA_VERSION "\nlibcurl "));
  CHECK_THAT(text, Catch::Contains("\nOpenSSL 3."));
}

TEST_CASE("cli json: strings are quoted with quotes, backslashes and control characters escaped") {
  CHECK(wandura::cli::json_string("plain") == "\"plain\"");
  CHECK(wandura::cli::json_string("a\"b\\c") == "\"a\\\"b\\\\c\"");
  CHECK(wandura::cli::json_string("l1\nl2\t\r") == "\"l1\\nl2\\t\\r\"");
  CHECK(wandura::cli::json_string(std::string_view("\x01\x1f", 2)) == "\"\\u0001\\u001f\"");
  CHECK(wandura::cli::json_string("Épisode 4 · naïve ✓") == "\"Épisode 4 · naïve ✓\""); // UTF-8 passes through
  CHECK(wandura::cli::json_string("") == "\"\"");
}

TEST_CASE("cli json: a bounded string keeps its first bytes, never half a UTF-8 character, and marks the cut") {
  using wandura::cli::json_string;
  CHECK(json_string(std::string(300, 'z'), 200) == "\"" + std::string(200, 'z') + "...\"");
  CHECK(json_string(std::string(200, 'z'), 200) == "\"" + std::string(200, 'z') + "\"");
  CHECK(json_string("abc", 3) == "\"abc\"");
  CHECK(json_string("\n\n\n", 2) == "\"\\n\\n...\""); // cut first, then escaped the JSON way
  // "é" is two bytes: a cut between them moves back before it.
  CHECK(json_string(std::string(199, 'a') + "\xc3\xa9"
                                            "b",
                    200) == "\"" + std::string(199, 'a') + "...\"");
  CHECK(json_string(std::string(198, 'a') + "\xc3\xa9"
                                            "b",
                    200) == "\"" + std::string(198, 'a') + "\xc3\xa9...\"");
  // "✓" is three bytes; a run of stray continuation bytes is cut at most three bytes early.
  CHECK(json_string(std::string(199, 'a') + "\xe2\x9c\x93", 200) == "\"" + std::string(199, 'a') + "...\"");
  CHECK(json_string(std::string(10, '\x80'), 5) == "\"\x80\x80...\"");
}

TEST_CASE("cli connection: a flag given an empty value is refused, not read as left out") {
  // `--base-url "$URL"` with URL unset must not quietly reach $WANDURA_BASE_URL or the default server instead.
  ::setenv("WANDURA_BASE_URL", "http://127.0.0.1:9999", 1);
  ::setenv("WANDURA_API_KEY", "env-key", 1);
  CLI::App app("test", "test");
  wandura::cli::connection c;
  c.add_options(app);
  argv_of a({"--base-url", ""});
  REQUIRE_FALSE(wandura::cli::parse(app, a.span()));
  CHECK_THROWS_WITH(c.to_client_options(), Catch::StartsWith("--base-url: must not be empty"));
  wandura::cli::connection key;
  key.api_key = "";
  CHECK_THROWS_WITH(key.to_client_options(), Catch::StartsWith("--api-key: must not be empty"));
  wandura::cli::connection ca;
  ca.ca_bundle = "";
  CHECK_THROWS_WITH(ca.to_client_options(), Catch::StartsWith("--ca-bundle: must not be empty"));
  ::unsetenv("WANDURA_API_KEY");
  ::unsetenv("WANDURA_BASE_URL");
}

TEST_CASE("cli text output: control bytes from the server are written as hex escapes, never sent to the terminal") {
  using wandura::detail::printable;
  CHECK(printable("org_demo") == "org_demo");
  CHECK(printable("\x1b[31mred\x1b]0;title\x07") == "\\x1b[31mred\\x1b]0;title\\x07");
  CHECK(printable(std::string_view("a\0b\r\n\x7f", 6)) == "a\\x00b\\x0d\\x0a\\x7f");
  CHECK(printable(std::string(5000, 'x'), wandura::cli::whole_line) == std::string(4096, 'x') + "...");
}

TEST_CASE("cli errors: what the server said is one line, escaped and bounded, without the parts it left out") {
  using wandura::cli::server_said;
  auto const failed = [](wandura::error_info info) {
    return wandura::error(wandura::errc::http_error, "get_config: failed after 1 attempt: HTTP 400 code=bad",
                          std::move(info));
  };
  CHECK(server_said(failed({.http_status = 400,
                            .error_code = "bad",
                            .reason = "prefetch_shed",
                            .request_id = "req_1",
                            .attempts = 1,
                            .server_message = "No film \"x\"."})) ==
        "the server said: No film \"x\". (reason=prefetch_shed, request_id=req_1)");
  CHECK(server_said(failed({.http_status = 404, .attempts = 1, .server_message = "Not found."})) ==
        "the server said: Not found.");
  CHECK(server_said(failed({.http_status = 404, .request_id = "req_2", .attempts = 1})) ==
        "the server said: (request_id=req_2)");
  CHECK(server_said(failed({.http_status = 404, .error_code = "not_found", .attempts = 1})).empty()); // on what()
  CHECK(server_said(wandura::error(wandura::errc::connect_failed, "could not connect")).empty());
  // Its text may hold line breaks and terminal escapes: written as \xHH, and bounded like a whole line.
  CHECK(server_said(failed({.reason = "r\r\n", .server_message = "a\nb\x1b[2J\xff"})) ==
        "the server said: a\\x0ab\\x1b[2J\\xff (reason=r\\x0d\\x0a)");
  auto const long_text =
      server_said(failed({.request_id = std::string(300, 'i'), .server_message = std::string(5000, 'm')}));
  CHECK(long_text ==
        "the server said: " + std::string(4096, 'm') + "... (request_id=" + std::string(200, 'i') + "...)");
}

TEST_CASE("cli parsing: arguments nobody took are named without the values of options, secrets included") {
  CLI::App app("test", "wandura");
  wandura::cli::apply_style(app, "");
  auto* tickets = wandura::cli::add_command(app, "tickets", "", "");
  std::string key;
  tickets->add_option("--api-key", key);
  using wandura::cli::unexpected_arguments;
  // An option of a command written before the command's name (`wandura --api-key KEY tickets`).
  auto const misplaced = unexpected_arguments(app, app, {"--api-key", "s3cr3t"});
  CHECK_THAT(misplaced, Catch::Contains("--api-key goes after the command's name"));
  CHECK_THAT(misplaced, !Catch::Contains("s3cr3t"));
  CHECK_THAT(unexpected_arguments(app, *tickets, {"--api-key=s3cr3t"}), !Catch::Contains("s3cr3t"));
  // A mistyped option: its name, never the value after it or after its '='.
  CHECK(unexpected_arguments(app, *tickets, {"--api-kye", "s3cr3t"}) == "unexpected argument: --api-kye");
  CHECK(unexpected_arguments(app, *tickets, {"--api-kye=s3cr3t"}) == "unexpected argument: --api-kye");
  // Without any option among them, the arguments themselves, in the order given.
  CHECK(unexpected_arguments(app, *tickets, {"extra", "more"}) == "unexpected arguments: extra more");
}
