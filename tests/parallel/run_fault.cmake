# Runs parallel_fault under mpirun (cmake -P; variables MPIEXEC, NP, EXE, MODE, EXPECT,
# MAX_SECONDS) and passes only when mpirun exits non-zero, the output matches EXPECT
# (a regex; empty = no check), and the ranks that waited in a collective were gone
# within MAX_SECONDS of entering it (so nobody hung past the timeout).
execute_process(COMMAND ${MPIEXEC} -n ${NP} --oversubscribe ${EXE} ${MODE}
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
string(TIMESTAMP t_end "%s")
message("---- mpirun output (exit status ${rc}) ----\n${out}----")
if("${rc}" STREQUAL "0")
  message(FATAL_ERROR "mpirun exited 0: the ${MODE} fault was not detected")
endif()
if(NOT "${EXPECT}" STREQUAL "" AND NOT "${out}" MATCHES "${EXPECT}")
  message(FATAL_ERROR "the output lacks the expected message: ${EXPECT}")
endif()
if(NOT "${out}" MATCHES "entering collective at ([0-9]+)")
  message(FATAL_ERROR "no rank reported entering the collective")
endif()
math(EXPR waited "${t_end} - ${CMAKE_MATCH_1}")
if(waited GREATER MAX_SECONDS)
  message(FATAL_ERROR "ranks took ${waited} s to exit after entering the collective (limit ${MAX_SECONDS} s)")
endif()
message("ok: ${MODE} fault detected, mpirun exit status ${rc}, ranks gone ${waited} s after entering")
