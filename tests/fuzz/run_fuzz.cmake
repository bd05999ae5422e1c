# Runs one libFuzzer target for SECONDS: cmake -DEXE=... -DWORK=dir -DSEEDS=dir -DSECONDS=n -P run_fuzz.cmake
# New inputs go to WORK (the seed folder is only read). Fails when the target finds a
# crash, a leak, a timeout or an out-of-memory input (libFuzzer's exit status), and
# prints libFuzzer's final statistics (executions) either way.
file(MAKE_DIRECTORY ${WORK})
get_filename_component(artifacts ${WORK} DIRECTORY)
execute_process(COMMAND ${EXE} -max_total_time=${SECONDS} -timeout=10 -rss_limit_mb=2048 -print_final_stats=1
                        -artifact_prefix=${artifacts}/ ${WORK} ${SEEDS}
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
string(REGEX MATCH "stat::number_of_executed_units: *[0-9]+" runs "${err}")
string(REGEX MATCH "#[0-9]+[^\n]*DONE[^\n]*" done "${err}")
message("${EXE}: ${runs}; ${done}")
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "fuzzing failed (exit ${rc}); artifacts in ${artifacts}\n${err}")
endif()
