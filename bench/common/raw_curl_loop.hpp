// The baseline of the loopback benchmarks: the plainest libcurl-multi loop there is (curl_multi_perform +
// curl_multi_poll, each easy handle re-added as it finishes). Header-only.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include <curl/curl.h>

#include "loopback_bench.hpp"

namespace wandura::bench {

/// Posts `request_body` to one URL from `concurrency` easy handles at once, for a given time, on one multi handle
/// kept for the object's life: its connections (and their TLS sessions) stay open from one run to the next, as
/// the transport's do. Settings that decide the protocol are the transport's: HTTP/2 offered by ALPN on `https://`
/// (CURL_HTTP_VERSION_2TLS) with CURLOPT_PIPEWAIT (wait for a connection that may multiplex rather than open
/// another), HTTP/1.1 on `http://`; at most 64 connections to the host and 64 kept idle; the peer's certificate and
/// name verified against `ca_file`. Not thread-safe; one run at a time.
class raw_curl_loop {
public:
  /// @param url `http://` or `https://` URL posted to.
  /// @param ca_file PEM file of the CA that signed the server's certificate; empty for `http://`.
  /// @param header_lines sent besides `Authorization` and `Content-Type` (whole lines, "Name: value"), so that both
  ///        sides of a comparison put the same bytes on the wire. An `Idempotency-Key` line's value is a stand-in:
  ///        every request gets a key of its own of the same length (a counter in hex), as the client's calls do, so
  ///        that over HTTP/2 neither side's key is sent as an index into the peers' HPACK tables.
  /// @param min_body a transfer counts as good when it answered 200 with at least this many bytes.
  raw_curl_loop(std::string url, std::string ca_file, std::vector<std::string> const& header_lines,
                std::size_t min_body = 2000)
      : url_(std::move(url)), ca_file_(std::move(ca_file)), min_body_(min_body), multi_(curl_multi_init()) {
    if (multi_ == nullptr) {
      throw std::runtime_error("curl_multi_init failed");
    }
    curl_multi_setopt(multi_, CURLMOPT_MAX_HOST_CONNECTIONS, 64L);
    curl_multi_setopt(multi_, CURLMOPT_MAXCONNECTS, 64L);
    lines_ = {"Authorization: Bearer bench-key", "Content-Type: application/json"};
    lines_.insert(lines_.end(), header_lines.begin(), header_lines.end());
  }
  raw_curl_loop(raw_curl_loop const&) = delete;
  raw_curl_loop& operator=(raw_curl_loop const&) = delete;
  ~raw_curl_loop() {
    for (auto& t : transfers_) {
      curl_easy_cleanup(t->easy);
      curl_slist_free_all(t->headers);
    }
    curl_multi_cleanup(multi_); // closes the pooled connections
  }

  /// Runs `concurrency` transfers back to back until `duration` has passed and the last ones have finished.
  run_result run(int concurrency, std::chrono::duration<double> duration) {
    grow_to(static_cast<std::size_t>(concurrency));
    run_result result;
    run_window const window(duration);
    for (int i = 0; i < concurrency; ++i) {
      add(*transfers_[static_cast<std::size_t>(i)]);
    }
    int running = concurrency;
    while (running > 0) {
      curl_multi_perform(multi_, &running);
      int left = 0;
      while (CURLMsg* msg = curl_multi_info_read(multi_, &left)) {
        if (msg->msg != CURLMSG_DONE) {
          continue;
        }
        result.count(finish(msg->easy_handle, msg->data.result, result), window);
        if (window.open()) {
          transfer* t = nullptr;
          curl_easy_getinfo(msg->easy_handle, CURLINFO_PRIVATE, &t);
          add(*t);
          ++running;
        }
      }
      if (running > 0) {
        curl_multi_poll(multi_, nullptr, 0, 100, nullptr);
      }
    }
    result.close(window);
    return result;
  }

private:
  struct transfer {
    CURL* easy = nullptr;
    std::string body;
    curl_slist* headers = nullptr; ///< this transfer's own lines, so that its key can change between requests
    char* key = nullptr;           ///< the value of its `Idempotency-Key` line, when it has one
  };

  /// Gives `t` a key no request had before (the same length as the stand-in), then starts it.
  void add(transfer& t) {
    if (t.key != nullptr) {
      static constexpr char hex[] = "0123456789abcdef";
      std::uint64_t n = ++keys_made_;
      for (std::size_t i = std::strlen(t.key); i > 0; --i, n >>= 4) {
        t.key[i - 1] = hex[n & 15];
      }
    }
    curl_multi_add_handle(multi_, t.easy);
  }

  static std::size_t on_body(char* data, std::size_t size, std::size_t count, void* userp) {
    static_cast<transfer*>(userp)->body.append(data, size * count);
    return size * count;
  }

  void grow_to(std::size_t n) {
    while (transfers_.size() < n) {
      auto t = std::make_unique<transfer>();
      t->easy = curl_easy_init();
      if (t->easy == nullptr) {
        throw std::runtime_error("curl_easy_init failed");
      }
      for (auto const& line : lines_) {
        curl_slist* const appended = curl_slist_append(t->headers, line.c_str());
        if (appended == nullptr) {
          throw std::runtime_error("curl_slist_append failed");
        }
        t->headers = appended;
        constexpr std::string_view key_name = "Idempotency-Key: ";
        if (line.rfind(key_name, 0) == 0) {
          curl_slist* last = t->headers;
          while (last->next != nullptr) {
            last = last->next;
          }
          t->key = last->data + key_name.size(); // libcurl reads the lines when a request starts
        }
      }
      CURL* e = t->easy;
      curl_easy_setopt(e, CURLOPT_URL, url_.c_str());
      curl_easy_setopt(e, CURLOPT_POSTFIELDS, request_body.data());
      curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(request_body.size()));
      curl_easy_setopt(e, CURLOPT_HTTPHEADER, t->headers);
      curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, &on_body);
      curl_easy_setopt(e, CURLOPT_WRITEDATA, t.get());
      curl_easy_setopt(e, CURLOPT_PRIVATE, t.get());
      curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
      curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, 8000L);
      curl_easy_setopt(e, CURLOPT_HTTP_VERSION, static_cast<long>(CURL_HTTP_VERSION_2TLS));
      bool const tls = url_.rfind("https://", 0) == 0;
      curl_easy_setopt(e, CURLOPT_PIPEWAIT, tls ? 1L : 0L);
      if (tls) {
        curl_easy_setopt(e, CURLOPT_CAINFO, ca_file_.c_str());
        curl_easy_setopt(e, CURLOPT_SSL_VERIFYPEER, 1L);
        curl_easy_setopt(e, CURLOPT_SSL_VERIFYHOST, 2L);
      }
      transfers_.push_back(std::move(t));
    }
  }

  /// How the transfer ended; notes what the wire showed and the first failure in `result`.
  outcome finish(CURL* easy, CURLcode code, run_result& result) const {
    transfer* t = nullptr;
    curl_easy_getinfo(easy, CURLINFO_PRIVATE, &t);
    long status = 0;
    curl_easy_getinfo(easy, CURLINFO_RESPONSE_CODE, &status);
    long version = 0;
    curl_easy_getinfo(easy, CURLINFO_HTTP_VERSION, &version);
    long connects = 0;
    curl_easy_getinfo(easy, CURLINFO_NUM_CONNECTS, &connects);
    result.wire.connections_opened += static_cast<std::uint64_t>(connects);
    curl_multi_remove_handle(multi_, easy);
    auto const bytes = t->body.size();
    t->body.clear();
    if (code == CURLE_OK && status == 200 && bytes >= min_body_) {
      result.wire.count_version(version == CURL_HTTP_VERSION_1_1 ? 11 : version == CURL_HTTP_VERSION_2_0 ? 20 : 0);
      return outcome::good;
    }
    if (code == CURLE_HTTP2_STREAM || code == CURLE_HTTP2) {
      return outcome::stream_reset;
    }
    if (result.first_failure.empty()) {
      result.first_failure =
          std::string(curl_easy_strerror(code)) + ", HTTP " + std::to_string(status) + ", " + std::to_string(bytes) + " bytes";
    }
    return outcome::failed;
  }

  std::string url_;
  std::string ca_file_;
  std::size_t min_body_;
  CURLM* multi_;
  std::vector<std::string> lines_;
  std::uint64_t keys_made_ = 0;
  std::vector<std::unique_ptr<transfer>> transfers_;
};

} // namespace wandura::bench
