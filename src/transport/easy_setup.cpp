#include "transport/easy_setup.hpp"

#include <openssl/ssl.h>
#include <sys/socket.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <string_view>

#include "transport/content_length.hpp"
#include "transport/curl_timer.hpp"
#include "transport/header_check.hpp"
#include "wandura/detail/ca_bundle.hpp"
#include "wandura/detail/header_value.hpp"
#include "wandura/error.hpp"

namespace wandura::detail {
namespace {

// --- libcurl's easy callbacks: inside libcurl calls on the strand; never call libcurl, never throw ------------

curl_socket_t on_open_socket(void* clientp, curlsocktype purpose, curl_sockaddr* address) noexcept {
  auto* t = static_cast<transfer*>(clientp);
  if (purpose != CURLSOCKTYPE_IPCXN) {
    return CURL_SOCKET_BAD;
  }
  try {
    t->unadopted_sockets.reserve(t->unadopted_sockets.size() + 1); // push_back below then cannot throw
  } catch (...) {
    return CURL_SOCKET_BAD;
  }
  opened_socket const s = t->sockets->open(*address, t->may_multiplex);
  if (s.fd != CURL_SOCKET_BAD) {
    t->unadopted_sockets.push_back(s);
    ++t->sockets_opened_since_prereq;
  }
  return s.fd;
}

int on_close_socket(void* clientp, curl_socket_t fd) noexcept {
  return static_cast<socket_set*>(clientp)->close(fd);
}

/// A request the server may receive twice without harm: a GET, or one that carries an `Idempotency-Key` (the
/// server answers a repeat with the first result).
bool is_replayable(http_request const& request) noexcept {
  return request.method == http_method::get ||
         std::any_of(request.headers.begin(), request.headers.end(),
                     [](http_header const& h) { return iequals(h.name, "Idempotency-Key"); });
}

/// libcurl 7.88 sends a POST body under 64 KiB in one write with the request's headers (MAX_INITIAL_POST_SIZE,
/// without `Expect: 100-continue`, which the transport never sends); a larger one goes out afterwards, through its
/// upload loop, as every body does over HTTP/2.
constexpr std::size_t libcurl_initial_post_max = 64 * 1024;

/// A reused HTTP/1.x connection with bytes waiting before the request has gone out: they answer nothing asked (a
/// stray or repeated response, a 408 sent before closing an idle connection) and would be read as this request's
/// answer, shifting every later one (libcurl 7.88 reuses such a connection: curl#10646). It is shut down, so that
/// libcurl's write of the request fails and it sends the request on a new connection, as for any reused connection
/// found dead before the request went out: nothing of it reached this one. The caller has checked that the
/// connection speaks HTTP/1.x (`speaks_http1`): an idle HTTP/2 connection may hold the server's frames (a PING, new
/// SETTINGS), which are no stray answer.
///
/// The socket set notices input on idle connections (socket_set::collect_idle_input: one read of the set for the
/// first such reuse in a libcurl action, whatever the number of connections reused in it); only a connection it
/// marked is read here, so a reuse with nothing waiting costs no system call of its own. When the set could not be
/// read, the connection is read here, as every reused one once was.
bool give_up_poisoned(transfer const& t, char const* peer, int peer_port, int local_port) noexcept {
  bool const vouched = t.sockets->collect_idle_input();
  if (vouched && !t.sockets->any_idle_input()) {
    return false;
  }
  curl_socket_t const fd = t.sockets->find_connection(peer, peer_port, local_port, vouched);
  if (fd == CURL_SOCKET_BAD) {
    return false;
  }
  char byte = 0;
  if (::recv(fd, &byte, 1, MSG_PEEK | MSG_DONTWAIT) <= 0) {
    return false; // nothing waiting (or the peer closed: libcurl finds that itself)
  }
  ::shutdown(fd, SHUT_RDWR);
  return true;
}

/// Connected (TLS included), the request is about to be sent. The connection's socket is the last one this
/// transfer opened in the address family of `local_ip`: libcurl tries the addresses of one family one after the
/// other, and closes the other family's attempt when one wins. From now on a connection owns it and closes it
/// through the close callback.
///
/// A second call in one transfer is libcurl sending the request again on another connection, because the
/// connection it went out on closed before any byte of the response (or an HTTP/2 server refused the stream). The
/// server may have read the first copy, so only a replayable request goes again, once; any other ends here, as the
/// connection reset it is (transport.hpp, "Retries and idempotency").
int on_prereq(void* clientp, char* primary_ip, char* local_ip, int primary_port, int local_port) noexcept {
  auto* t = static_cast<transfer*>(clientp);
  // The sockets opened since the last call are this connection's candidates; none: a pooled connection. (Those of
  // an earlier connect that lost are no candidates: libcurl closed them.)
  std::size_t const opened = std::exchange(t->sockets_opened_since_prereq, 0);
  bool const reused = opened == 0;
  bool const http1 = speaks_http1(*t); // asked once: an ALPN query over TLS
  // A resend the transport refuses (below) is refused here, on this connection: giving it up first would have
  // libcurl open a new one only for that.
  bool const refuse_resend =
      t->facts.request_started && (t->facts.resent || t->facts.response_started || !is_replayable(*t->request));
  // Before the first send and before a resend alike: libcurl sends a request again on the next pooled connection
  // when the one it went out on died, and that one may hold bytes too. Nothing goes out on a connection given up,
  // so it is not counted as a resend; libcurl itself stops after five connections that fail so.
  if (reused && http1 && !refuse_resend && give_up_poisoned(*t, primary_ip, primary_port, local_port)) {
    t->renew_handle = true;    // libcurl counts the resend that follows against the handle (easy_setup::configure)
    return CURL_PREREQFUNC_OK; // libcurl's write fails; the request goes on a new connection (this call again)
  }
  if (t->facts.request_started) {
    t->renew_handle = true; // a resend, counted against the handle (easy_setup::configure)
  }
  if (!reused) {
    int const family = std::strchr(local_ip, ':') != nullptr ? AF_INET6 : AF_INET;
    auto& v = t->unadopted_sockets;
    auto const candidates_end = v.rbegin() + static_cast<std::ptrdiff_t>(std::min(opened, v.size()));
    auto it = std::find_if(v.rbegin(), candidates_end, [family](opened_socket const& s) { return s.family == family; });
    if (it != candidates_end) {
      t->sockets->adopt(*it);
      v.erase(std::next(it).base());
    }
  }
  if (t->facts.request_started) {
    // Once per attempt, before any response byte, and only a replayable request: libcurl itself would send it up
    // to five more times (an HTTP/2 server refusing every stream), each on a new connection, outside the retry
    // engine's budget and pacing, or after the answer had begun (a stream refused after its headers).
    if (refuse_resend) {
      t->facts.resend_refused = true;
      return CURL_PREREQFUNC_ABORT;
    }
    t->facts.resent = true;
  }
  t->facts.request_started = true;
  bool const sent_with_headers =
      t->request->method != http_method::post || t->request->body.size() < libcurl_initial_post_max;
  t->facts.first_byte_time_is_response = sent_with_headers && http1;
  return CURL_PREREQFUNC_OK;
}

/// Most of a declared Content-Length reserved before its bytes come: a length is a promise, not bytes, and a
/// header line must not claim memory the body never fills (a larger body grows as it arrives).
constexpr std::size_t max_reserved_body_bytes = std::size_t{1} << 20U;

/// Records Content-Length and reserves the body (up to the cap and `max_reserved_body_bytes`); false (the
/// transfer ends) when the response gave a value that is not one valid length (`parse_content_length`: RFC 9110
/// section 8.6) or already gave a different length, or when memory runs out. Nothing is left to libcurl, which reads
/// the digits a value starts with (`5, 500` as 5, `+96` as 96) and keeps the last of several. Whether the length is
/// over the cap is decided at the end of the header block (`length_over_cap`): a Content-Encoding that libcurl decodes
/// may come after it.
bool take_content_length(transfer& t, std::string_view value, std::size_t max_bytes) noexcept {
  auto const length = parse_content_length(value);
  if (!length || (t.facts.has_length && t.facts.length != *length)) {
    t.facts.invalid_length = true; // which length frames the body is unknowable: refuse the response
    return false;
  }
  t.facts.has_length = true;
  t.facts.length = *length;
  try {
    t.response.body.reserve(
        static_cast<std::size_t>(std::min<std::uint64_t>({*length, max_bytes, max_reserved_body_bytes})));
  } catch (...) {
    return false;
  }
  return true;
}

/// At the end of a header block: its Content-Length is over the cap, and it counts the bytes the cap counts. With
/// `accept_compressed`, an encoded body's Content-Length counts wire bytes while the cap counts decoded ones (an
/// incompressible body is larger encoded): such a body is left to the write callback, which counts what libcurl
/// decoded. Refused here, a response is refused before its body is read.
[[nodiscard]] bool length_over_cap(transfer const& t) noexcept {
  return t.facts.has_length && t.facts.length > t.max_body_bytes && !(t.decodes_body && t.content_encoded);
}

/// A status line: a new response begins (an interim 1xx one, or the final one after it). Only the final response's
/// headers are the response's. The status line is the first line of each header block, and its code libcurl's
/// reading of it (which allows what a parse of our own might not: several blanks, a lowercase `http/`), so that the
/// two never disagree on where a response begins.
void start_response(transfer& t) noexcept {
  t.response.headers.clear();
  long code = 0;
  int const status = curl_easy_getinfo(t.easy, CURLINFO_RESPONSE_CODE, &code) == CURLE_OK ? static_cast<int>(code) : 0;
  t.facts.refused_status = status == 101 || status > 599 ? status : 0;
  t.interim_response = status >= 100 && status < 200;
  t.bodyless = t.interim_response || status == 204 || status == 304;
  t.facts.has_length = false;
  t.facts.response_started = true;
  t.facts.headers_complete = false;
  t.facts.interim_only = false;
  t.content_encoded = false;
}

std::size_t on_header(char* data, std::size_t size, std::size_t count, void* userp) noexcept {
  auto* t = static_cast<transfer*>(userp);
  std::size_t const n = size * count;
  std::string_view line(data, n);
  if (t->hooks->on_header != nullptr) {
    try {
      t->hooks->on_header(t->hooks->context);
    } catch (...) {
      return 0; // never let an exception cross into libcurl: abort this transfer instead
    }
  }
  t->header_bytes += n; // every response's: endless 1xx responses must not reach libcurl's own limit first
  if (t->header_bytes > max_response_header_bytes) {
    t->facts.headers_too_large = true;
    return 0;
  }
  if (t->facts.headers_complete && !t->interim_response) {
    // After the final response's header block: a trailer section (chunked, or HTTP/2), which must not be merged
    // into the header section (RFC 9110 §6.5.1). Nothing reads trailers: they are dropped (counted above).
    return n;
  }
  bool const status_line = std::exchange(t->at_block_start, false);
  if (status_line) {
    start_response(*t);
    if (t->facts.refused_status != 0) {
      return 0; // after a 101, libcurl would wait for a response in the protocol switched to, until the timeout
    }
  }
  while (!line.empty() && (line.back() == '\n' || line.back() == '\r')) {
    line.remove_suffix(1);
  }
  if (line.empty()) {
    t->facts.headers_complete = true; // end of a header block
    t->facts.interim_only = t->interim_response;
    t->at_block_start = true;
    if (length_over_cap(*t)) {
      t->facts.body_too_large = true;
      return 0; // refuse before reading the body
    }
    return n;
  }
  auto colon = line.find(':');
  if (status_line || colon == std::string_view::npos || colon == 0) {
    return n; // the status line, or not a header field (obsolete line folding, garbage libcurl tolerated)
  }
  auto const name = line.substr(0, colon);
  auto const value = trim_ows(line.substr(colon + 1));
  // A 1xx, 204 or 304 response ends with its header block, whatever its Content-Length says (RFC 9112 §6.3;
  // libcurl ignores the field there too): it frames nothing, so it is neither checked nor held against the cap.
  if (!t->bodyless && iequals(name, "content-length") && !take_content_length(*t, value, t->max_body_bytes)) {
    return 0;
  }
  if (iequals(name, "content-encoding") && !value.empty() && !iequals(value, "identity")) {
    t->content_encoded = true;
  }
  try {
    t->response.headers.add(name, value);
  } catch (...) {
    return 0; // out of memory: libcurl ends the transfer with CURLE_WRITE_ERROR
  }
  return n;
}

std::size_t on_body(char* data, std::size_t size, std::size_t count, void* userp) noexcept {
  auto* t = static_cast<transfer*>(userp);
  std::size_t const n = size * count;
  if (t->response.body.size() + n > t->max_body_bytes) {
    t->facts.body_too_large = true;
    return 0; // libcurl aborts with CURLE_WRITE_ERROR; the removal happens later, on the strand
  }
  try {
    t->response.body.append(data, n);
  } catch (...) {
    return 0;
  }
  return n;
}

/// Whether a variable libcurl reads to pick a proxy is set (libcurl's names: http_proxy in lower case only, the
/// others in either case). libcurl reads them for every request; the transport looks once, at construction.
[[nodiscard]] bool proxy_in_environment() noexcept {
  for (char const* name : {"http_proxy", "https_proxy", "HTTPS_PROXY", "all_proxy", "ALL_PROXY"}) {
    if (char const* value = std::getenv(name); value != nullptr && *value != '\0') {
      return true;
    }
  }
  return false;
}

/// Builds the request's header list in storage reused across requests (no allocation once warm). `user_agent_line`
/// ("User-Agent: ...", or empty for none) is added unless the request has its own `User-Agent`.
void build_header_list(transfer& t, std::string_view user_agent_line) {
  auto const& headers = t.request->headers;
  std::size_t const most = headers.size() + 4; // and the User-Agent, and up to three of libcurl's own turned off
  if (t.header_lines.size() < most) {
    t.header_lines.resize(most);
  }
  bool has_accept = false;
  bool has_content_type = false;
  bool has_user_agent = false;
  for (std::size_t i = 0; i < headers.size(); ++i) {
    auto const& name = headers[i].name;
    has_accept = has_accept || iequals(name, "accept");
    has_content_type = has_content_type || iequals(name, "content-type");
    has_user_agent = has_user_agent || iequals(name, "user-agent");
    auto& line = t.header_lines[i];
    line.assign(name);
    // "Name;" is libcurl's way to send a header with an empty value: "Name:" followed by nothing but spaces and
    // tabs would remove it. Such a value is an empty one in HTTP (whitespace around a value is not part of it,
    // RFC 9110 §5.5), and is sent as one.
    if (headers[i].value.find_first_not_of(" \t") == std::string::npos) {
      line.push_back(';');
    } else {
      line.append(": ").append(headers[i].value);
    }
  }
  // "Name:" removes a header libcurl would add by itself, so that a request carries only its own headers and what
  // HTTP needs: libcurl sends "Accept: */*" on every request that has none, labels a POST body without a type as
  // a form ("application/x-www-form-urlencoded"), and asks for 100-continue (waiting up to a second for it) on
  // bodies over 1 MiB (1024 bytes before 7.77). Each is added only when it applies, one header fewer for libcurl
  // to compare all of its own against on every request otherwise.
  std::size_t used = headers.size();
  if (!has_user_agent && !user_agent_line.empty()) {
    t.header_lines[used++].assign(user_agent_line);
  }
  if (!has_accept) {
    t.header_lines[used++].assign("Accept:");
  }
  if (t.request->method == http_method::post && !has_content_type) {
    t.header_lines[used++].assign("Content-Type:");
  }
  if (t.request->body.size() >= 1024) {
    t.header_lines[used++].assign("Expect:"); // never wait for 100-continue
  }
  t.header_nodes.resize(used);
  for (std::size_t i = 0; i < used; ++i) {
    t.header_nodes[i].data = t.header_lines[i].data();
    t.header_nodes[i].next = (i + 1 < used) ? &t.header_nodes[i + 1] : nullptr;
  }
}

} // namespace

bool speaks_http1(transfer const& t) noexcept {
  if (!t.may_multiplex) {
    return true;
  }
  curl_tlssessioninfo* tls = nullptr;
  if (curl_easy_getinfo(t.easy, CURLINFO_TLS_SSL_PTR, &tls) != CURLE_OK || tls == nullptr ||
      tls->backend != CURLSSLBACKEND_OPENSSL || tls->internals == nullptr) {
    return false;
  }
  unsigned char const* protocol = nullptr;
  unsigned int length = 0;
  SSL_get0_alpn_selected(static_cast<SSL*>(tls->internals), &protocol, &length);
  return std::string_view(reinterpret_cast<char const*>(protocol), protocol != nullptr ? length : 0) != "h2";
}

easy_setup::easy_setup(transport_options options, socket_set& sockets)
    : options_(std::move(options)), sockets_(sockets) {
  if (!is_header_value(options_.user_agent)) {
    throw error(make_error_code(errc::invalid_argument),
                "transport_options::user_agent: " + header_value_refusal("User-Agent", options_.user_agent));
  }
  if (!options_.ca_bundle.empty()) {
    if (auto why = ca_bundle_refusal(options_.ca_bundle); !why.empty()) {
      throw error(make_error_code(errc::invalid_argument), "transport_options::ca_bundle " + why);
    }
  }
  if (options_.default_connect_timeout.count() <= 0) {
    options_.default_connect_timeout = std::chrono::milliseconds(3000);
  }
  h2c_reuse_broken_ = curl_version_info(CURLVERSION_NOW)->version_num < 0x080000;
  no_proxy_in_environment_ = !proxy_in_environment();
  if (!options_.user_agent.empty()) {
    user_agent_line_ = "User-Agent: " + options_.user_agent;
  }
}

std::error_code easy_setup::configure(transfer& t, std::chrono::steady_clock::time_point now, std::string& why) const {
  if (t.easy == nullptr) {
    t.easy = curl_easy_init();
    if (t.easy == nullptr) {
      why = "curl_easy_init failed";
      return make_error_code(errc::transport_failed);
    }
    set_constant_options(t);
  } else if (t.renew_handle) {
    // libcurl lets a request be sent again on a new connection when its reused one dies before the response, five
    // times per request, but 7.72 to 8.16 count those resends per easy handle and reset the count only when the
    // sixth fails or the handle is reset (curl#18926): a pooled handle would fail every sixth resend of its life
    // with CURLE_SEND_ERROR. A handle whose last request was sent again (its pre-request callback ran twice, or gave
    // up a poisoned connection) or failed (a resend whose connect failed never reaches that callback) is reset, and
    // set up again, before its next request.
    curl_easy_reset(t.easy);
    set_constant_options(t);
    t.url.clear(); // the URL options go again
  }
  t.renew_handle = false;
  t.max_body_bytes = options_.max_response_bytes;
  t.decodes_body = options_.accept_compressed;
  // Timeouts: what is left of the attempt's (the request may have waited in the queue), rounded up, plus a margin,
  // so that libcurl's own deadline comes after the transport's (transport_impl::expire_attempts). Without it,
  // libcurl 7.88, which reads elapsed time up to 1 ms ahead, timed 2 requests in 20 out itself against a busy
  // socket, 0.6 ms before the transport's deadline (curl_timer::libcurl_timeout_margin).
  long timeout_ms = 0;
  if (t.deadline != std::chrono::steady_clock::time_point::max()) {
    auto const remaining = std::chrono::ceil<std::chrono::milliseconds>(t.deadline - now);
    if (remaining.count() <= 0) {
      why = "attempt timeout passed while queued behind max_in_flight";
      return make_error_code(errc::attempt_timeout);
    }
    timeout_ms = static_cast<long>((remaining + curl_timer::libcurl_timeout_margin).count());
  }
  auto const connect =
      t.options.connect_timeout.count() > 0 ? t.options.connect_timeout : options_.default_connect_timeout;
  curl_easy_setopt(t.easy, CURLOPT_TIMEOUT_MS, timeout_ms);
  curl_easy_setopt(t.easy, CURLOPT_CONNECTTIMEOUT_MS, static_cast<long>(connect.count()));
  if (t.url.empty() || t.request->url != t.url) { // else libcurl still holds this handle's last URL, the same
    if (auto ec = configure_url(t, why)) {
      return ec;
    }
  }
  return configure_method(t, why);
}

std::error_code easy_setup::configure_url(transfer& t, std::string& why) const {
  // Parsed once here and handed over as a CURLU: with CURLOPT_URL libcurl would parse the string again for
  // every request (about 5 % of its work per request on a small POST).
  std::string const& url = t.request->url;
  t.url.clear(); // until libcurl accepted the new one
  if (t.parsed_url == nullptr && (t.parsed_url = curl_url()) == nullptr) {
    why = "curl_url failed";
    return make_error_code(errc::transport_failed);
  }
  // Only HTTP(S), named: libcurl would also read file:// URLs from the local disk or speak FTP, SCP and others, and
  // would guess a scheme for a URL without one ("127.0.0.1:8080/v1" as plain http).
  auto const has_scheme = [&url](std::string_view scheme) {
    return url.size() >= scheme.size() && iequals(std::string_view(url).substr(0, scheme.size()), scheme);
  };
  if (!has_scheme("http://") && !has_scheme("https://")) {
    why = "URL refused: only http:// and https:// are sent";
    return make_error_code(errc::invalid_argument);
  }
  if (auto rc = curl_url_set(t.parsed_url, CURLUPART_URL, url.c_str(), 0); rc != CURLUE_OK) {
    why = std::string("URL refused: ") + curl_url_strerror(rc);
    return make_error_code(errc::transport_failed);
  }
  if (curl_easy_setopt(t.easy, CURLOPT_CURLU, t.parsed_url) != CURLE_OK) {
    why = "URL refused by libcurl";
    return make_error_code(errc::transport_failed);
  }
  t.url.assign(url);
  bool const is_http = has_scheme("http://");
  bool const prior_knowledge = is_http && options_.http2_prior_knowledge;
  curl_easy_setopt(t.easy, CURLOPT_HTTP_VERSION,
                   prior_knowledge ? static_cast<long>(CURL_HTTP_VERSION_2_PRIOR_KNOWLEDGE)
                                   : static_cast<long>(CURL_HTTP_VERSION_2TLS));
  // Wait for a connection being set up that may multiplex (HTTP/2) rather than open another one; plain
  // http:// without prior knowledge is HTTP/1.1, where waiting would only serialise the first requests.
  // libcurl before 8.0.0 fails every request that reuses a prior-knowledge connection with CURLE_HTTP2
  // (curl#10634, fixed by curl#10643): there, each such request gets a connection of its own.
  bool const fresh = prior_knowledge && h2c_reuse_broken_;
  t.may_multiplex = !fresh && (!is_http || prior_knowledge);
  curl_easy_setopt(t.easy, CURLOPT_PIPEWAIT, t.may_multiplex ? 1L : 0L);
  curl_easy_setopt(t.easy, CURLOPT_FRESH_CONNECT, fresh ? 1L : 0L);
  curl_easy_setopt(t.easy, CURLOPT_FORBID_REUSE, fresh ? 1L : 0L);
  return {};
}

std::error_code easy_setup::configure_method(transfer& t, std::string& why) const {
  http_request const& req = *t.request;
  why = check_headers(req.headers);
  if (!why.empty()) {
    return make_error_code(errc::invalid_argument);
  }
  if (req.method == http_method::post) {
    curl_easy_setopt(t.easy, CURLOPT_POST, 1L);
    curl_easy_setopt(t.easy, CURLOPT_POSTFIELDS, req.body.data());
    curl_easy_setopt(t.easy, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(req.body.size()));
  } else {
    curl_easy_setopt(t.easy, CURLOPT_HTTPGET, 1L);
  }
  build_header_list(t, user_agent_line_);
  curl_easy_setopt(t.easy, CURLOPT_HTTPHEADER, t.header_nodes.empty() ? nullptr : t.header_nodes.data());
  return {};
}

void easy_setup::set_constant_options(transfer& t) const {
  CURL* e = t.easy;
  curl_easy_setopt(e, CURLOPT_PRIVATE, &t);
  curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(e, CURLOPT_FOLLOWLOCATION, 0L);
  curl_easy_setopt(e, CURLOPT_ERRORBUFFER, t.error_text.data());
  curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, &on_body);
  curl_easy_setopt(e, CURLOPT_WRITEDATA, &t);
  curl_easy_setopt(e, CURLOPT_HEADERFUNCTION, &on_header);
  curl_easy_setopt(e, CURLOPT_HEADERDATA, &t);
  curl_easy_setopt(e, CURLOPT_PREREQFUNCTION, &on_prereq);
  curl_easy_setopt(e, CURLOPT_PREREQDATA, &t);
  curl_easy_setopt(e, CURLOPT_OPENSOCKETFUNCTION, &on_open_socket);
  curl_easy_setopt(e, CURLOPT_OPENSOCKETDATA, &t);
  // The close callback may run after this transfer moved on (libcurl's pool keeps the connection): it gets the set.
  curl_easy_setopt(e, CURLOPT_CLOSESOCKETFUNCTION, &on_close_socket);
  curl_easy_setopt(e, CURLOPT_CLOSESOCKETDATA, &sockets_);
  curl_easy_setopt(e, CURLOPT_SSL_VERIFYPEER, options_.verify_peer ? 1L : 0L);
  curl_easy_setopt(e, CURLOPT_SSL_VERIFYHOST, options_.verify_host ? 2L : 0L);
  if (!options_.ca_bundle.empty()) {
    curl_easy_setopt(e, CURLOPT_CAINFO, options_.ca_bundle.c_str());
  }
  // The User-Agent is a line of the request's header list (build_header_list): given as CURLOPT_USERAGENT, libcurl
  // would format that line again for every request (~3k instructions and an allocation). A proxy's CONNECT does not
  // carry the list's lines, so where a proxy may be used it is given this way too, for the CONNECT.
  if (!options_.user_agent.empty() && !no_proxy_in_environment_) {
    curl_easy_setopt(e, CURLOPT_USERAGENT, options_.user_agent.c_str());
  }
  curl_easy_setopt(e, CURLOPT_TCP_KEEPALIVE, options_.tcp_keepalive ? 1L : 0L);
  curl_easy_setopt(e, CURLOPT_TCP_KEEPIDLE, static_cast<long>(options_.tcp_keepalive_idle.count()));
  curl_easy_setopt(e, CURLOPT_TCP_KEEPINTVL, static_cast<long>(options_.tcp_keepalive_interval.count()));
  curl_easy_setopt(e, CURLOPT_DNS_CACHE_TIMEOUT, static_cast<long>(options_.dns_cache_ttl.count()));
  curl_easy_setopt(e, CURLOPT_MAXAGE_CONN, static_cast<long>(options_.max_idle_age.count()));
  if (options_.accept_compressed) {
    curl_easy_setopt(e, CURLOPT_ACCEPT_ENCODING, "");
  }
  // A proxy's answer to CONNECT is not a response to the request: kept from the header callback, which takes every
  // line after a final (non-1xx) header block for a trailer.
  curl_easy_setopt(e, CURLOPT_SUPPRESS_CONNECT_HEADERS, 1L);
  if (no_proxy_in_environment_) {
    // No proxy: say so, with an empty exception list, which spares libcurl reading the environment per request.
    curl_easy_setopt(e, CURLOPT_PROXY, "");
    curl_easy_setopt(e, CURLOPT_NOPROXY, "");
  }
}

} // namespace wandura::detail
