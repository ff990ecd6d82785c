// The executor an `asio::any_io_executor` holds, looked at safely. Shared by the playback client and the fleet. Not
// public API.
#pragma once

#include <typeinfo>

#include <asio/any_io_executor.hpp>

namespace wandura::detail {

/// The executor `ex` holds when it is exactly an `Executor`, null otherwise (and for an empty `ex`).
///
/// Asio 1.22's `any_io_executor::target<T>()` does not check the type: it returns the held executor cast to `T*`
/// whatever it is, so a strand or a thread pool's executor read as an `io_context` executor gives a wild context
/// pointer. Every look at a held executor goes through here.
template <class Executor> [[nodiscard]] Executor const* held_executor(asio::any_io_executor const& ex) noexcept {
  return ex.target_type() == typeid(Executor) ? ex.target<Executor>() : nullptr;
}

} // namespace wandura::detail
