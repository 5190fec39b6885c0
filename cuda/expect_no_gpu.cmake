# ctest's cuda.runner_reports_no_gpu (cuda/CMakeLists.txt): runs plumb_cuda_runner with no visible GPU and
# requires exit status 2 and the one-line "no CUDA GPU" message. Not a check of any kernel.
execute_process(COMMAND ${RUNNER} --suite ${SUITE} --results ${RESULTS} RESULT_VARIABLE status
                OUTPUT_VARIABLE out ERROR_VARIABLE err)
message("${out}${err}")
if(NOT status STREQUAL "2")
  message(FATAL_ERROR "plumb_cuda_runner exited with ${status}, expected 2 (no GPU)")
endif()
if(NOT out MATCHES "^plumb_cuda_runner: no CUDA GPU available \\([^\n]*\\); no kernel was run or checked\n$")
  message(FATAL_ERROR "plumb_cuda_runner's output is not the one 'no CUDA GPU available' line")
endif()
