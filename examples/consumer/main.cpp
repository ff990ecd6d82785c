// Links against the installed package and exercises a little of every layer it exports.
#include <wandura/error.hpp>

#include <cstdio>

int main() {
  std::error_code ec = wandura::errc::attempt_timeout;
  if (ec != wandura::condition::timeout) {
    std::puts("error conditions do not match");
    return 1;
  }
  std::printf("wandura consumer: %s\n", ec.message().c_str());
  return 0;
}
