// `wandura tickets`: asks for the tickets of one batch and prints each item's outcome.
#include <cstdio>
#include <exception>
#include <optional>
#include <string>

#include <asio/co_spawn.hpp>
#include <asio/io_context.hpp>

#include "apps/cli.hpp"
#include "apps/commands.hpp"
#include "wandura/error.hpp"
#include "wandura/playback/client.hpp"
#include "wandura/playback/viewer_ref.hpp"

namespace wandura::cli {

namespace {

constexpr char const* tickets_usage =
    R"(usage: wandura tickets --film REF --episode N [--prefetch K] [--unlocked-through M] [--intent play|prefetch]
                       [--viewer-secret S --user U --install I | --viewer-ref R]
                       [--union-info D] [--drm-kek K] [--policy interactive|background|standard]
                       [--idempotency-key K] [--json] [--base-url URL] [--api-key KEY]

Asks for the tickets of one batch (POST /v1/playback/tickets): episode N with --intent (default play), then the
next K episodes as prefetch (seed 000: starting N asks for N+1 and N+2 in the same request).

  --film REF             the film's catalogue reference, e.g. the-heiress-returns
  --episode N            the episode, >= 1
  --prefetch K           how many following episodes to prefetch, 0-2 (default: 2 when --unlocked-through is
                         given, else 0); never past --unlocked-through
  --unlocked-through M   the last episode the viewer may watch (the paywall), >= N
  --intent I             intent of episode N: play (default) or prefetch
  --viewer-secret S --user U --install I
                         compute the viewer_ref (HMAC of the user id + hash of the install id; SPEC §1)
  --viewer-ref R         send this viewer_ref as is (without one, nothing is reused)
  --union-info D         the device id (default "wandura-cli"); tickets are bound to it
  --drm-kek K            the device public key (default "wandura-cli-kek")
  --policy P             retry policy: interactive (default; 3 retries, 15 s), background, standard (seed 004)
  --idempotency-key K    1-200 visible ASCII characters; a repeat with the same key returns the first result
  --json                 print {"items":[...],"attempts":N,"replayed":bool} instead of a table
  --base-url URL         the API (default $WANDURA_BASE_URL, else http://127.0.0.1:8787)
  --api-key KEY          the API key (default $WANDURA_API_KEY)

Each retry prints a WARN line on stderr. Exit status: 0 when the play ticket was granted (or, without a play
item, every ticket); 1 otherwise or when the call failed; 2 for a usage error.
)";

struct tickets_args {
  connection conn;
  std::string film;
  std::optional<std::int32_t> episode;
  std::optional<std::int32_t> prefetch;
  std::optional<std::int32_t> unlocked_through;
  intent first_intent = intent::play;
  std::optional<std::string> viewer_secret, user, install, viewer_ref;
  std::string union_info = "wandura-cli";
  std::string drm_kek = "wandura-cli-kek";
  retry_policy policy = retry_policy::interactive();
  std::optional<std::string> idempotency_key;
  bool json = false;
  bool help = false;
};

tickets_args parse(std::span<char* const> args) {
  tickets_args a;
  arg_reader r(args);
  while (r.next()) {
    auto const& f = r.flag();
    if (f == "--help") {
      a.help = true;
      return a;
    } else if (a.conn.read(r)) {
    } else if (f == "--film") {
      a.film = r.value();
    } else if (f == "--episode") {
      a.episode = static_cast<std::int32_t>(r.integer(1, INT32_MAX));
    } else if (f == "--prefetch") {
      a.prefetch = static_cast<std::int32_t>(r.integer(0, 2));
    } else if (f == "--unlocked-through") {
      a.unlocked_through = static_cast<std::int32_t>(r.integer(0, INT32_MAX));
    } else if (f == "--intent") {
      auto v = r.value();
      if (v != "play" && v != "prefetch") {
        throw usage_error("--intent: expected play or prefetch, got \"" + v + "\"");
      }
      a.first_intent = intent_from_string(v);
    } else if (f == "--viewer-secret") {
      a.viewer_secret = r.value();
    } else if (f == "--user") {
      a.user = r.value();
    } else if (f == "--install") {
      a.install = r.value();
    } else if (f == "--viewer-ref") {
      a.viewer_ref = r.value();
    } else if (f == "--union-info") {
      a.union_info = r.value();
    } else if (f == "--drm-kek") {
      a.drm_kek = r.value();
    } else if (f == "--policy") {
      a.policy = policy_from_name(r.value());
    } else if (f == "--idempotency-key") {
      a.idempotency_key = r.value();
    } else if (f == "--json") {
      a.json = true;
    } else {
      r.unknown();
    }
  }
  if (a.film.empty()) {
    throw usage_error("--film is required");
  }
  if (!a.episode) {
    throw usage_error("--episode is required");
  }
  if (a.unlocked_through && *a.unlocked_through < *a.episode) {
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
  return a;
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
  std::int32_t const n = *a.episode;
  b.episodes.push_back({a.film, n, a.first_intent});
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
      out += ",\"error_code\":" + json_string(it.error_code);
    }
    if (!it.reason.empty()) {
      out += ",\"reason\":" + json_string(it.reason);
    }
    out += "}";
  }
  out += "],\"attempts\":" + std::to_string(r.attempts) + ",\"replayed\":" + (r.replayed ? "true" : "false") + "}\n";
  std::fwrite(out.data(), 1, out.size(), stdout);
}

void print_table(ticket_batch_result const& r) {
  std::printf("%-28s %4s  %-8s  %-12s %6s  %s\n", "FILM", "EP", "INTENT", "OUTCOME", "STATUS", "DETAIL");
  for (auto const& it : r.items) {
    std::string detail;
    if (it.ticket) {
      detail = it.ticket->ticket_id + " (expires " + it.ticket->expires_at_text + ")";
      if (it.reused) {
        detail += ", reused";
      }
    } else {
      detail = it.error_code.empty() ? std::string("-") : it.error_code;
      if (!it.reason.empty()) {
        detail += " (" + it.reason + ")";
      }
      if (it.retry_after) {
        detail += ", retry after " + std::to_string(it.retry_after->count()) + " s";
      }
    }
    std::printf("%-28s %4d  %-8s  %-12s %6d  %s\n", it.film_ref.c_str(), it.episode_no, intent_text(it).c_str(),
                std::string(to_string(it.outcome)).c_str(), it.status, detail.c_str());
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

} // namespace

int run_tickets(std::span<char* const> args) {
  auto const a = parse(args);
  if (a.help) {
    std::fputs(tickets_usage, stdout);
    return exit_ok;
  }
  auto batch = make_batch(a);
  call_options per_call;
  per_call.policy = a.policy;
  per_call.idempotency_key = a.idempotency_key;

  asio::io_context io;
  client api(io.get_executor(), a.conn.to_client_options());
  std::exception_ptr failure;
  ticket_batch_result result;
  asio::co_spawn(io, api.issue_tickets(std::move(batch), std::move(per_call)),
                 [&](std::exception_ptr e, ticket_batch_result r) {
                   failure = e;
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
      print_error("tickets", e, a.json);
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

} // namespace wandura::cli
