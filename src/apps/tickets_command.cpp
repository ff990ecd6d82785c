// `wandura tickets`: asks for the tickets of one batch and prints each item's outcome.
#include <algorithm>
#include <cstdio>
#include <exception>
#include <memory>
#include <optional>
#include <string>
#include <utility>

#include <asio/co_spawn.hpp>
#include <asio/io_context.hpp>

#include "apps/cli.hpp"
#include "apps/commands.hpp"
#include "wandura/detail/printable.hpp"
#include "wandura/error.hpp"
#include "wandura/playback/client.hpp"
#include "wandura/playback/viewer_ref.hpp"

namespace wandura::cli {

namespace {

struct tickets_args {
  connection conn;
  std::string film;
  std::int32_t episode = 0;
  std::optional<std::int32_t> prefetch;
  std::optional<std::int32_t> unlocked_through;
  std::string first_intent = "play";
  std::optional<std::string> viewer_secret, user, install, viewer_ref;
  std::string union_info = "wandura-cli";
  std::string drm_kek = "wandura-cli-kek";
  std::string policy = "interactive";
  std::optional<std::string> idempotency_key;
  bool json = false;
};

/// Adds the batch's options (every one but the connection's) to `app`, parsed into `a`.
void add_batch_options(CLI::App& app, tickets_args& a) {
  using cli::number_in;
  app.add_option("--film", a.film, "the film's catalogue reference, e.g. the-heiress-returns")
      ->type_name("REF")
      ->required();
  app.add_option("--episode", a.episode, "the episode, >= 1")
      ->type_name("N")
      ->required()
      ->transform(number_in<std::int32_t>(1, INT32_MAX));
  app.add_option("--prefetch", a.prefetch,
                 "how many following episodes to prefetch, 0-2 (default: 2 when\n--unlocked-through is given, "
                 "else 0); never past --unlocked-through")
      ->type_name("K")
      ->transform(number_in<std::int32_t>(0, 2));
  app.add_option("--unlocked-through", a.unlocked_through, "the last episode the viewer may watch (the paywall), >= N")
      ->type_name("M")
      ->transform(number_in<std::int32_t>(0, INT32_MAX));
  app.add_option("--intent", a.first_intent, "intent of episode N: play (default) or prefetch")
      ->type_name("I")
      ->check(CLI::IsMember({"play", "prefetch"}));
  app.add_option("--viewer-secret", a.viewer_secret,
                 "with --user and --install: compute the viewer_ref\n(HMAC of the user id + hash of the install id)")
      ->type_name("S");
  app.add_option("--user", a.user, "the user id the viewer_ref is computed from")->type_name("U");
  app.add_option("--install", a.install, "the install id the viewer_ref is computed from")->type_name("I");
  app.add_option("--viewer-ref", a.viewer_ref, "send this viewer_ref as is (without one, nothing is reused)")
      ->type_name("R");
  app.add_option("--union-info", a.union_info, "the device id (default \"wandura-cli\"); tickets are bound to it")
      ->type_name("D");
  app.add_option("--drm-kek", a.drm_kek, "the device public key (default \"wandura-cli-kek\")")->type_name("K");
  app.add_option("--policy", a.policy, "retry policy: interactive (default; 3 retries, 15 s), background, standard")
      ->type_name("P")
      ->check(CLI::IsMember({"interactive", "background", "standard"}));
  app.add_option("--idempotency-key", a.idempotency_key,
                 "1-200 visible ASCII characters; a repeat with the same key returns the first result")
      ->type_name("K");
  app.add_flag("--json", a.json, R"(print {"items":[...],"attempts":N,"replayed":bool} instead of a table)");
}

/// The checks between options that CLI11 cannot express one option at a time.
void check(tickets_args const& a) {
  if (a.film.empty()) {
    throw usage_error("--film: must not be empty");
  }
  if (a.viewer_ref && a.viewer_ref->empty()) {
    throw usage_error("--viewer-ref: must not be empty (leave it out to send none)");
  }
  if (a.unlocked_through && *a.unlocked_through < a.episode) {
    throw usage_error("--unlocked-through must be at least --episode");
  }
  bool const computed = a.viewer_secret || a.user || a.install;
  if (computed && !(a.viewer_secret && a.user && a.install)) {
    throw usage_error("--viewer-secret, --user and --install go together");
  }
  if (computed && a.viewer_ref) {
    throw usage_error("give either --viewer-ref or --viewer-secret/--user/--install, not both");
  }
  if (a.union_info.empty() || a.drm_kek.empty()) {
    throw usage_error("--union-info and --drm-kek must not be empty");
  }
  if (a.idempotency_key && !header_safe(*a.idempotency_key)) {
    throw usage_error("--idempotency-key: must not contain control characters (it is sent as a header)");
  }
}

ticket_batch make_batch(tickets_args const& a) {
  ticket_batch b;
  b.union_info = a.union_info;
  b.drm_kek = a.drm_kek;
  if (a.viewer_ref) {
    b.viewer_ref = *a.viewer_ref;
  } else if (a.viewer_secret) {
    std::error_code ec;
    auto ref = make_viewer_ref(*a.viewer_secret, *a.user, *a.install, ec);
    if (ec) {
      throw usage_error("--viewer-secret/--user/--install: must not be empty");
    }
    b.viewer_ref = std::move(ref);
  }
  std::int32_t const n = a.episode;
  b.episodes.push_back({a.film, n, intent_from_string(a.first_intent)});
  std::int32_t k = a.prefetch.value_or(a.unlocked_through ? 2 : 0);
  for (std::int32_t i = 1; i <= k; ++i) {
    if (n > INT32_MAX - i || (a.unlocked_through && n + i > *a.unlocked_through)) {
      break;
    }
    b.episodes.push_back({a.film, n + i, intent::prefetch});
  }
  return b;
}

std::string intent_text(ticket_item_result const& item) {
  return item.intent == intent::other ? item.intent_text : std::string(to_string(item.intent));
}

void print_json(ticket_batch_result const& r) {
  std::string out = "{\"items\":[";
  for (std::size_t i = 0; i < r.items.size(); ++i) {
    auto const& it = r.items[i];
    out += i == 0 ? "{" : ",{";
    out += "\"film_ref\":" + json_string(it.film_ref);
    out += ",\"episode_no\":" + std::to_string(it.episode_no);
    out += ",\"intent\":" + json_string(intent_text(it));
    out += ",\"outcome\":" + json_string(to_string(it.outcome));
    out += ",\"status\":" + std::to_string(it.status);
    out += std::string(",\"reused\":") + (it.reused ? "true" : "false");
    if (it.ticket) {
      auto const& t = *it.ticket;
      out += ",\"ticket\":{\"ticket_id\":" + json_string(t.ticket_id) +
             ",\"manifest_url\":" + json_string(t.manifest_url) + ",\"license_url\":" + json_string(t.license_url) +
             ",\"expires_at\":" + json_string(t.expires_at_text) + ",\"drm_payload\":" + json_string(t.drm_payload) +
             "}";
    }
    if (it.retry_after) {
      out += ",\"retry_after\":" + std::to_string(it.retry_after->count());
    }
    if (!it.error_code.empty()) {
      out += ",\"error_code\":" + json_string(it.error_code, detail::max_quoted_bytes); // bounded as in the table
    }
    if (!it.reason.empty()) {
      out += ",\"reason\":" + json_string(it.reason, detail::max_quoted_bytes);
    }
    if (!it.detail.empty()) { // the SDK's own words for an item it failed (missing or unreadable)
      out += ",\"detail\":" + json_string(it.detail, 2 * detail::max_quoted_bytes);
    }
    out += "}";
  }
  out += "],\"attempts\":" + std::to_string(r.attempts) + ",\"replayed\":" + (r.replayed ? "true" : "false") + "}\n";
  std::fwrite(out.data(), 1, out.size(), stdout);
}

/// One row per item. Every cell the server wrote goes through `detail::printable`: a film ref, code or ticket id
/// holding a line break or a terminal escape cannot add rows or reach the terminal as a control sequence.
/// The film and episode columns are as wide as their widest cell (at least 28 and 4), so that long refs and
/// episode numbers keep the columns after them aligned.
void print_table(ticket_batch_result const& r) {
  int film_width = 28;
  int episode_width = 4;
  for (auto const& it : r.items) {
    film_width = std::max(film_width, static_cast<int>(detail::printable(it.film_ref).size()));
    episode_width = std::max(episode_width, static_cast<int>(std::to_string(it.episode_no).size()));
  }
  std::printf("%-*s %*s  %-8s  %-12s %6s  %s\n", film_width, "FILM", episode_width, "EP", "INTENT", "OUTCOME", "STATUS",
              "DETAIL");
  for (auto const& it : r.items) {
    std::string cell;
    if (it.ticket) {
      cell =
          detail::printable(it.ticket->ticket_id) + " (expires " + detail::printable(it.ticket->expires_at_text) + ")";
      if (it.reused) {
        cell += ", reused";
      }
    } else {
      cell = it.error_code.empty() ? std::string("-") : detail::printable(it.error_code);
      if (!it.reason.empty()) {
        cell += " (" + detail::printable(it.reason) + ")";
      }
      if (it.retry_after) {
        cell += ", retry after " + std::to_string(it.retry_after->count()) + " s";
      }
      if (!it.detail.empty()) {
        cell += ": " + detail::printable(it.detail, 2 * detail::max_quoted_bytes);
      }
    }
    std::printf("%-*s %*d  %-8s  %-12s %6d  %s\n", film_width, detail::printable(it.film_ref).c_str(), episode_width,
                it.episode_no, detail::printable(intent_text(it)).c_str(), std::string(to_string(it.outcome)).c_str(),
                it.status, cell.c_str());
  }
  std::printf("attempts: %d, replayed: %s\n", r.attempts, r.replayed ? "yes" : "no");
}

/// Exit 0 when the play item was granted, or every item when there is no play item.
int exit_status(ticket_batch_result const& r) {
  bool has_play = false;
  bool all_granted = true;
  for (auto const& it : r.items) {
    bool const granted = it.outcome == item_outcome::granted;
    if (it.intent == intent::play) {
      has_play = true;
      if (!granted) {
        return exit_failed;
      }
    }
    all_granted = all_granted && granted;
  }
  return has_play || all_granted ? exit_ok : exit_failed;
}

int run_tickets(tickets_args const& a) {
  check(a);
  auto batch = make_batch(a);
  call_options per_call;
  per_call.policy = policy_from_name(a.policy);
  per_call.idempotency_key = a.idempotency_key;

  asio::io_context io;
  client api(io.get_executor(), a.conn.to_client_options());
  std::exception_ptr failure;
  ticket_batch_result result;
  asio::co_spawn(io, api.issue_tickets(std::move(batch), std::move(per_call)),
                 [&](std::exception_ptr e, ticket_batch_result r) {
                   failure = std::move(e);
                   result = std::move(r);
                 });
  io.run();
  if (failure) {
    try {
      std::rethrow_exception(failure);
    } catch (wandura::error const& e) {
      if (e.code() == make_error_code(errc::invalid_idempotency_key)) {
        throw usage_error(std::string("--idempotency-key: ") + e.what());
      }
      if (e.code() == make_error_code(errc::invalid_argument)) { // refused before sending: a bad flag value
        throw usage_error(e.what());
      }
      print_error("tickets", e, a.json, a.conn.tls_hint(e));
      return exit_failed;
    }
  }
  if (a.json) {
    print_json(result);
  } else {
    print_table(result);
  }
  return exit_status(result);
}

} // namespace

command add_tickets_command(CLI::App& wandura) {
  auto* app = add_command(wandura, "tickets",
                          "ask for the tickets of one batch (POST /v1/playback/tickets): episode N, then the next\n"
                          "K episodes as prefetch, in one request, as a player starting episode N does",
                          "Each retry prints a WARN line on stderr. Exit status: 0 when the play ticket was granted "
                          "(or, without a play\nitem, every ticket); 1 otherwise or when the call failed; 2 for a "
                          "usage error.");
  auto a = std::make_shared<tickets_args>();
  add_batch_options(*app, *a);
  a->conn.add_options(*app);
  return {app, [a] { return run_tickets(*a); }};
}

} // namespace wandura::cli
