# A short overloaded smooth_playback run with --plan-out (issue 12): the demo's play_success_bound in report.json
# must match plan_bound_test's independent recomputation from plan.json to 0.01. The limit is low enough that plays
# alone exceed it, so the bound is below 1 and the recomputation exercises the ticket queue, not only "all served".
# The run may fail plays (exit 1); any other exit status fails the test.
#
# EXTRA_ARGS (a list) is added to the demo's command line, e.g. --processes=2 for a fleet run.
#
#   cmake -DDEMO=/path/to/smooth_playback -DCHECK=/path/to/plan_bound_test -DWORK_DIR=dir [-DEXTRA_ARGS=...]
#         -P demo_plan_bound.cmake
cmake_minimum_required(VERSION 3.25)
foreach(var DEMO CHECK WORK_DIR)
  if(NOT DEFINED ${var})
    message(FATAL_ERROR "demo_plan_bound: -D${var}=... is required")
  endif()
endforeach()

file(REMOVE_RECURSE ${WORK_DIR})
file(MAKE_DIRECTORY ${WORK_DIR})
execute_process(COMMAND ${DEMO} --viewers 300 --duration 5 --playback-limit 600 --plan-out ${WORK_DIR}/plan.json
                        --report-dir ${WORK_DIR} ${EXTRA_ARGS}
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err TIMEOUT 240)
message("${out}${err}")
if(NOT (rc EQUAL 0 OR rc EQUAL 1))
  message(FATAL_ERROR "smooth_playback exited with ${rc}")
endif()
if(NOT out MATCHES "best possible")
  message(FATAL_ERROR "the summary does not print the success next to the bound")
endif()
execute_process(COMMAND ${CHECK} ${WORK_DIR}/plan.json ${WORK_DIR}/report.json --expect-below 0.99
                RESULT_VARIABLE check_rc OUTPUT_VARIABLE check_out ERROR_VARIABLE check_err)
message("${check_out}${check_err}")
if(NOT check_rc EQUAL 0)
  message(FATAL_ERROR "plan_bound_test exited with ${check_rc}")
endif()
