function(wandura_apply_warnings target)
  target_compile_options(${target} INTERFACE -Wall -Wextra -Wpedantic -Wconversion -Wsign-conversion
                                             -Wshadow -Wnon-virtual-dtor)
  if(WANDURA_WERROR)
    target_compile_options(${target} INTERFACE -Werror)
  endif()
  # GCC 12 at -O3 reports impossible overlaps inside libstdc++'s own string concatenation (-Wrestrict false
  # positives, GCC bug 105329, fixed in 13); they are not in our code, so they must not fail the -Werror build.
  if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU" AND CMAKE_CXX_COMPILER_VERSION VERSION_LESS 13)
    target_compile_options(${target} INTERFACE -Wno-restrict)
  endif()
endfunction()

function(wandura_apply_sanitizers target)
  if(NOT WANDURA_SANITIZE)
    return()
  endif()
  if(WANDURA_SANITIZE MATCHES "thread" AND WANDURA_SANITIZE MATCHES "address")
    message(FATAL_ERROR "WANDURA_SANITIZE: thread cannot be combined with address")
  endif()
  set(flags -fsanitize=${WANDURA_SANITIZE} -fno-omit-frame-pointer -fno-sanitize-recover=all)
  target_compile_options(${target} INTERFACE ${flags})
  target_link_options(${target} INTERFACE ${flags})
  # GCC 12 warns (-Wtsan) that TSan does not model std::atomic_thread_fence, which Asio uses; with -Werror that
  # stopped every TSan build at the first Asio include.
  if(WANDURA_SANITIZE MATCHES "thread" AND CMAKE_CXX_COMPILER_ID STREQUAL "GNU"
     AND CMAKE_CXX_COMPILER_VERSION VERSION_GREATER_EQUAL 12)
    target_compile_options(${target} INTERFACE -Wno-tsan)
  endif()
  # GCC 12 with -fsanitize=thread inlines Asio's awaitable frame allocator (awaitable_frame_base::operator new ->
  # thread_info_base::allocate -> aligned_alloc) into coroutine ramps, then reports the frame's class-specific
  # operator delete (which ends in free()) as mismatched with aligned_alloc. The pair is matched; the warning is a
  # GCC false positive for class-scope operator new/delete in coroutine frames (GCC bug 109224). Off for TSan
  # builds only, where it fired; every other build keeps it.
  if(WANDURA_SANITIZE MATCHES "thread" AND CMAKE_CXX_COMPILER_ID STREQUAL "GNU"
     AND CMAKE_CXX_COMPILER_VERSION VERSION_LESS 13)
    target_compile_options(${target} INTERFACE -Wno-mismatched-new-delete)
  endif()
endfunction()
