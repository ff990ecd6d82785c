// The style every command line of the project shares (`wandura`, `wandura-emulator`, `smooth_playback`): CLI11
// applications with one help layout, one format for usage errors and the same exit statuses. Header-only, built
// into the programs, never installed; a program links `detail::printable` (src/printable.cpp), with the client
// library or, in the emulator, on its own.
#pragma once

#include <algorithm>
#include <charconv>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <system_error>
#include <type_traits>
#include <vector>

#include <CLI/CLI.hpp>

#include "cli/standard_streams.hpp"
#include "wandura/detail/printable.hpp"

namespace wandura::cli {

/// Exit statuses of every command line: success, the work failed, the command line could not be run.
inline constexpr int exit_ok = 0;
inline constexpr int exit_failed = 1;
inline constexpr int exit_usage = 2;

/// A command line that CLI11 accepted but the program cannot run (two flags that do not go together, a value the
/// program refuses): reported like CLI11's own usage errors, exit status 2.
struct usage_error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

/// The full name of `app` as typed: "wandura tickets" for the subcommand `tickets` of `wandura`.
inline std::string full_name(CLI::App const& app) {
  std::string name = app.get_name();
  for (auto const* p = app.get_parent(); p != nullptr; p = p->get_parent()) {
    name.insert(0, p->get_name() + " ");
  }
  return name;
}

/// CLI11's help layout with a blank line between a command's description and its usage line.
class help_formatter : public CLI::Formatter {
public:
  std::string make_description(CLI::App const* app) const override {
    std::string text = CLI::Formatter::make_description(app);
    return text.empty() ? text : text + "\n";
  }
};

/// Gives `app` the project's help layout and option defaults; subcommands added afterwards inherit them.
/// Options take their value as `--flag VALUE` or `--flag=VALUE`; given twice, the last one counts.
/// `footer` ends the help text (what the exit statuses mean, where to read more).
inline void apply_style(CLI::App& app, std::string footer) {
  auto formatter = std::make_shared<help_formatter>();
  formatter->column_width(30);
  formatter->label("Usage", "usage");
  formatter->label("OPTIONS", "options");
  formatter->label("SUBCOMMAND", "command");
  formatter->label("REQUIRED", "(required)");
  app.formatter(formatter);
  app.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast)->group("options");
  app.set_help_flag("-h,--help", "print this help and exit")->group("options");
  app.footer(std::move(footer));
}

/// Adds the subcommand `name` to `parent` (styled by `apply_style`), listed under "commands" in the parent's help.
inline CLI::App* add_command(CLI::App& parent, std::string name, std::string description, std::string footer) {
  auto* sub = parent.add_subcommand(std::move(name), std::move(description));
  sub->group("commands");
  sub->footer(std::move(footer));
  if (auto* help = sub->get_help_ptr()) {
    help->group("options");
  }
  return sub;
}

/// A validator for a number written in plain decimal digits (a `.` too when `T` is floating point) from `lo` to
/// `hi`. Unlike CLI11's own conversion it reads "010" as ten (not octal eight) and refuses "0x10", "+4", "nan",
/// "inf" and blanks, and a whole number past what `T` holds (CLI11's strtoull would clamp it to the maximum); its
/// message names the range: `--episode: expected a whole number from 1 to 2147483647, got "0"`. Give it to
/// `Option::transform`, not `check`: it drops the leading zeros of a whole number before CLI11 converts the text, and
/// only a transform may rewrite it.
template <typename T> CLI::Validator number_in(T lo, T hi) {
  auto const range_text = [](T v) {
    std::string s = std::to_string(v);
    if constexpr (std::is_floating_point_v<T>) {
      s.erase(s.find_last_not_of('0') + 1);
      if (s.back() == '.') {
        s.pop_back();
      }
    }
    return s;
  };
  char const* kind = std::is_floating_point_v<T> ? "a number" : "a whole number";
  std::string const expected = std::string("expected ") + kind + " from " + range_text(lo) + " to " + range_text(hi);
  return CLI::Validator(
      [lo, hi, expected](std::string& text) -> std::string {
        std::string const given = text;
        bool plain = !text.empty();
        int dots = 0;
        for (char const c : text) {
          dots += c == '.' ? 1 : 0;
          plain = plain && ((c >= '0' && c <= '9') || (std::is_floating_point_v<T> && c == '.'));
        }
        if constexpr (!std::is_floating_point_v<T>) {
          if (plain) { // CLI11 reads a leading 0 as octal; here every number is decimal. "000" becomes "0".
            text.erase(0, std::min(text.find_first_not_of('0'), text.size() - 1));
          }
        }
        T v{};
        bool read = plain && dots <= 1 && text != ".";
        if constexpr (std::is_floating_point_v<T>) {
          read = read && CLI::detail::lexical_cast(text, v);
        } else if (read) { // from_chars, not strtoull: a value past what T holds is an error, never T's maximum
          auto const [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
          read = ec == std::errc() && end == text.data() + text.size();
        }
        if (!read || v < lo || v > hi) {
          return expected + ", got \"" + given + "\"";
        }
        return {};
      },
      "");
}

/// The most bytes of a whole line (a usage error, a WARN line, an exception's message) the programs print through
/// `detail::printable`, which writes its control bytes as `\xHH` so that none drives the user's terminal.
inline constexpr std::size_t whole_line = 4096;

/// Prints `message` as a usage error of `program`, with a pointer to its help, on stderr; returns exit_usage.
/// `message` quotes what the user typed (an unknown option, a value refused, CLI11's own words about it): it is
/// printed through `detail::printable`, at most `whole_line` bytes, so that an argument holding a terminal escape,
/// another control byte or bytes that are not UTF-8 shows as `\xHH` and never reaches the terminal raw.
inline int report_usage_error(std::string_view program, std::string_view message) {
  std::string const shown = detail::printable(message, whole_line);
  std::fprintf(stderr, "%.*s: %s\nRun \"%.*s --help\" for its options.\n", static_cast<int>(program.size()),
               program.data(), shown.c_str(), static_cast<int>(program.size()), program.data());
  return exit_usage;
}

/// The message for arguments no command took (`args`, in the order given), reported in the command `where`. Names
/// the options among them without their values, and nothing else when there are options: the value after a
/// mistyped or misplaced `--api-key` is a secret that must not reach a terminal or a log. An option of a
/// subcommand written before the subcommand's name is said to go after it.
inline std::string unexpected_arguments(CLI::App const& app, CLI::App const& where,
                                        std::vector<std::string> const& args) {
  std::vector<std::string> options;
  for (auto const& a : args) {
    if (a.size() > 1 && a.front() == '-') {
      options.push_back(a.substr(0, a.find('=')));
    }
  }
  for (auto const& name : options) {
    if (where.get_option_no_throw(name) != nullptr) { // given after `--`, or before the command's name
      return name + " goes after the command's name, before any \"--\": " + full_name(where) + " " + name + " ...";
    }
    if (&where != &app) { // an option of another command: unexpected like any other
      continue;
    }
    for (auto const* sub : app.get_subcommands([](CLI::App const*) { return true; })) {
      if (sub->get_option_no_throw(name) != nullptr) {
        return name + " goes after the command's name: " + full_name(app) + " COMMAND " + name + " ...";
      }
    }
  }
  auto const& shown = options.empty() ? args : options;
  std::string text = shown.size() > 1 ? "unexpected arguments:" : "unexpected argument:";
  for (auto const& a : shown) {
    text += " " + a;
  }
  return text;
}

/// The message of the validator `refuse_options_as_values` adds; `parse` reports it before any other.
inline constexpr std::string_view value_missing = "value missing: got the option ";

/// Makes every option of `app` and of its subcommands that takes a value refuse one that names an option of the
/// same command (`--api-key --json`, `--film --episode=1`): CLI11 takes the next argument as the value whatever it
/// looks like, and the command would then run with a key of "--json" or complain about an argument it did not
/// expect. The message names the option, never a value.
inline void refuse_options_as_values(CLI::App& app) {
  std::vector<std::string> names{"--help", "-h"};
  for (auto const* option : app.get_options()) {
    for (auto const& n : option->get_lnames()) {
      names.push_back("--" + n);
    }
    for (auto const& n : option->get_snames()) {
      names.push_back("-" + n);
    }
  }
  for (auto* option : app.get_options()) {
    if (option->get_expected_min() == 0 || option->get_type_size_min() == 0) {
      continue; // a flag
    }
    // A transform, which CLI11 runs before the checks and transforms added earlier (a number's range, a list of
    // names): their messages would quote the value taken, which may be the next option's, `--api-key=SECRET`.
    option->transform(CLI::Validator(
        [names](std::string& value) -> std::string {
          std::string const head = value.substr(0, value.find('='));
          if (std::find(names.begin(), names.end(), head) != names.end()) {
            return std::string(value_missing) + head;
          }
          return {};
        },
        ""));
  }
  for (auto* sub : app.get_subcommands([](CLI::App const*) { return true; })) {
    refuse_options_as_values(*sub);
  }
}

/// Parses `args` (the arguments after the program name) into `app`. Returns the exit status when the command line
/// ends the program: help or version printed on stdout (exit_ok, or exit_failed when stdout did not take it:
/// `flush_stdout`), or a usage error printed on stderr in the format of `report_usage_error`, naming the subcommand
/// it occurred in (exit_usage). Returns nullopt when the program should run.
inline std::optional<int> parse(CLI::App& app, std::span<char* const> args) {
  std::vector<std::string> reversed(args.rbegin(), args.rend()); // CLI11 takes the arguments last first
  try {
    app.parse(std::move(reversed));
    return std::nullopt;
  } catch (CLI::CallForHelp const&) {
    std::fputs(app.help().c_str(), stdout);
    return flush_stdout(app.get_name()) ? exit_ok : exit_failed;
  } catch (CLI::CallForAllHelp const&) {
    std::fputs(app.help("", CLI::AppFormatMode::All).c_str(), stdout);
    return flush_stdout(app.get_name()) ? exit_ok : exit_failed;
  } catch (CLI::CallForVersion const& v) {
    std::printf("%s\n", v.what());
    return flush_stdout(app.get_name()) ? exit_ok : exit_failed;
  } catch (CLI::ParseError const& e) {
    // The deepest subcommand reached names the command in the message. CLI11 checks required options and
    // subcommands before it reports arguments it did not expect, so `wandura --bogus` would read "A subcommand is
    // required" and `tickets --bogus` "--film is required": an argument nobody took is the mistake to name first.
    // CLI11's own message for them would also print option values, a misplaced `--api-key KEY` included.
    CLI::App const* where = &app;
    std::vector<std::string> unexpected = app.remaining();
    for (auto subs = app.get_subcommands(); !subs.empty(); subs = subs.front()->get_subcommands()) {
      where = subs.front();
      if (!where->get_prefix_command() && !where->get_allow_extras()) { // its leftovers are its own arguments
        auto const left = where->remaining();
        unexpected.insert(unexpected.end(), left.begin(), left.end());
      }
    }
    // An option that took the next option as its value left that option's own value unexpected: named first.
    if (std::string_view(e.what()).find(value_missing) != std::string_view::npos) {
      return report_usage_error(full_name(*where), e.what());
    }
    if (!unexpected.empty()) {
      return report_usage_error(full_name(*where), unexpected_arguments(app, *where, unexpected));
    }
    return report_usage_error(full_name(*where), e.what());
  }
}

} // namespace wandura::cli
