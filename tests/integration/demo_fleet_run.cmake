# A short smooth_playback run as a fleet of two client processes against the one in-process emulator: exits 0,
# report.json's per-process fields add up to its totals, the processes really are two (two pids, each with plays),
# the emulator counted exactly the fresh tickets of both, and the bound recomputed from --plan-out by
# plan_bound_test agrees. With -DSHARED=ON the processes share state through a private redis-server
# (--shared-state auto) and some tickets one process issued are reused by the other (cross_process_reuse > 0); the
# test prints "demo fleet: skipped" (ctest: skipped) when there is no redis-server or the demo has no fleet layer.
# With -DKILL=ON as well, that Redis is killed 2 s after the first viewer: the run completes from local state
# (shared_state_fallbacks > 0), the emulator's count still matches, and plays are still granted.
#
#   cmake -DDEMO=smooth_playback -DCHECK=plan_bound_test -DWORK_DIR=dir [-DSHARED=ON [-DKILL=ON]]
#         -P demo_fleet_run.cmake
cmake_minimum_required(VERSION 3.25)
foreach(var DEMO CHECK WORK_DIR)
  if(NOT DEFINED ${var})
    message(FATAL_ERROR "demo_fleet_run: -D${var}=... is required")
  endif()
endforeach()

set(args --viewers 300 --duration 5 --unavailable 0.03 --processes 2)
if(SHARED)
  find_program(redis_server redis-server)
  if(NOT redis_server AND NOT DEFINED ENV{WANDURA_REDIS_SERVER})
    message("demo fleet: skipped: no redis-server on PATH (install redis-server to run this test)")
    return()
  endif()
  list(APPEND args --shared-state auto)
  if(KILL)
    list(APPEND args --kill-shared-state-after 2)
  endif()
endif()

file(REMOVE_RECURSE ${WORK_DIR})
file(MAKE_DIRECTORY ${WORK_DIR})
execute_process(COMMAND ${DEMO} ${args} --plan-out ${WORK_DIR}/plan.json --report-dir ${WORK_DIR}
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err TIMEOUT 240)
message("${out}${err}")
if(SHARED AND rc EQUAL 2 AND err MATCHES "--shared-state is unavailable")
  message("demo fleet: skipped: this build has no fleet layer (hiredis not found)")
  return()
endif()
# Killed, a run may lose a play or two to the deadline and exit 1: the checks below bound how many.
if(NOT (rc EQUAL 0 OR (KILL AND rc EQUAL 1)))
  message(FATAL_ERROR "smooth_playback exited with ${rc}")
endif()
if(NOT out MATCHES "process 0 +pid" OR NOT out MATCHES "process 1 +pid")
  message(FATAL_ERROR "the summary has no line per process")
endif()

file(READ ${WORK_DIR}/report.json report)
function(expect condition_text)
  if(NOT (${ARGN}))
    message(FATAL_ERROR "report.json: expected ${condition_text}")
  endif()
endfunction()
macro(get out)
  string(JSON ${out} ERROR_VARIABLE json_error GET "${report}" ${ARGN})
  if(json_error)
    message(FATAL_ERROR "report.json: ${json_error}")
  endif()
endmacro()

get(processes processes)
expect("processes == 2, got ${processes}" processes EQUAL 2)
string(JSON per_process_count LENGTH "${report}" per_process)
expect("2 entries in per_process, got ${per_process_count}" per_process_count EQUAL 2)

# Every count the processes keep adds up to the total.
foreach(name play_requests play_failures tickets_granted tickets_fresh tickets_reused cache_hits coalesced
             prefetch_requested prefetch_shed retries budget_denied requests play_items_sent play_429
             cross_process_reuse shared_state_fallbacks)
  get(total ${name})
  set(sum 0)
  foreach(k 0 1)
    get(part per_process ${k} ${name})
    math(EXPR sum "${sum} + ${part}")
  endforeach()
  expect("${name}: the processes' ${sum} == the total ${total}" sum EQUAL total)
endforeach()

get(pid0 per_process 0 pid)
get(pid1 per_process 1 pid)
expect("two processes, got pids ${pid0} and ${pid1}" NOT pid0 EQUAL pid1)
foreach(k 0 1)
  get(plays per_process ${k} play_requests)
  expect("process ${k} played some actions, got ${plays}" plays GREATER 0)
  get(viewers_here per_process ${k} viewers)
  expect("process ${k} served some viewers, got ${viewers_here}" viewers_here GREATER 0)
endforeach()
get(viewers viewers)
get(v0 per_process 0 viewers)
get(v1 per_process 1 viewers)
math(EXPR both "${v0} + ${v1}")
# Actions are routed without affinity: some viewers' actions went to both processes.
expect("viewers == 300 and fewer than the processes' ${both} (viewers seen by both), got ${viewers}"
       viewers EQUAL 300 AND viewers LESS both)

get(fresh tickets_fresh)
get(counted emulator_tickets_counted)
expect("emulator_tickets_counted == tickets_fresh (${fresh}), got ${counted}" counted EQUAL fresh)
get(failures play_failures)
if(KILL)
  get(plays play_requests)
  math(EXPR most "${plays} / 100")
  expect("at most 1 % of plays failed with Redis killed, got ${failures} of ${plays}" failures LESS_EQUAL most)
else()
  expect("no failed play, got ${failures}" failures EQUAL 0)
endif()

get(shared shared_state)
get(cross cross_process_reuse)
if(SHARED)
  expect("shared_state is the private Redis, got ${shared}" shared MATCHES "^redis://127\\.0\\.0\\.1:[0-9]+$")
  if(NOT KILL) # killed 2 s in, Redis may not have lived long enough to serve another process
    expect("cross_process_reuse > 0 with shared state, got ${cross}" cross GREATER 0)
  endif()
  get(killed_at shared_state_killed_at_s)
  get(fallbacks shared_state_fallbacks)
  if(KILL)
    string(REGEX REPLACE "\\..*" "" killed_s "${killed_at}")
    expect("Redis killed 2 s after the first viewer, got ${killed_at}" killed_s EQUAL 2)
    expect("shared-state fallbacks after the kill, got ${fallbacks}" fallbacks GREATER 0)
  else()
    expect("Redis not killed (null), got ${killed_at}" killed_at STREQUAL "null" OR killed_at MATCHES "^$")
  endif()
else()
  if(NOT shared STREQUAL "") # null reads as ""
    message(FATAL_ERROR "report.json: expected no shared state (null), got ${shared}")
  endif()
  expect("no cross-process reuse without shared state, got ${cross}" cross EQUAL 0)
endif()

execute_process(COMMAND ${CHECK} ${WORK_DIR}/plan.json ${WORK_DIR}/report.json
                RESULT_VARIABLE check_rc OUTPUT_VARIABLE check_out ERROR_VARIABLE check_err)
message("${check_out}${check_err}")
if(NOT check_rc EQUAL 0)
  message(FATAL_ERROR "plan_bound_test exited with ${check_rc}")
endif()
message("demo fleet run: all checks passed")
