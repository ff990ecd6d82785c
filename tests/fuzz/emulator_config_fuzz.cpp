// libFuzzer target: the emulator's configuration file reader (`emulator::parse_config`), its fault-rule reader
// (`parse_fault_rules`, the body of `POST /_emulator/faults`) and the service built from an accepted config.
// A refusal must be a `config_error`; any other exception, crash or sanitizer report is a finding.
#include "wandura/emulator/emulator.hpp"

#include "emulator/clock.hpp"
#include "emulator/service.hpp"

#include <cstdint>
#include <string_view>

extern "C" int LLVMFuzzerTestOneInput(std::uint8_t const* data, std::size_t size) {
  namespace emu = wandura::emulator;
  std::string_view const json(reinterpret_cast<char const*>(data), size);
  try {
    (void)emu::parse_fault_rules(json);
  } catch (emu::config_error const&) {
  }
  try {
    emu::config cfg = emu::parse_config(json);
    cfg.seed = 1; // the service would otherwise draw a seed from the OS: keep runs reproducible
    emu::detail::emulator_clock clock(true);
    emu::detail::service const svc(std::move(cfg), clock);
  } catch (emu::config_error const&) {
  }
  return 0;
}
