# ctest's cuda.runner_skips_nothing (cuda/CMakeLists.txt): plumb_cuda_runner --check-only on the committed
# suite reads every case (exit 0) and skips none: the harness implements every op of the suite. The one
# allowed skip is a model case whose GGUF file is not in MODELS (a checkout without scripts/fetch-model
# smollm2), which says so; with the model there, the summary must say "0 skipped".
execute_process(COMMAND ${RUNNER} --suite ${SUITE} --models ${MODELS} --check-only RESULT_VARIABLE status
                OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT status STREQUAL "0")
  message(FATAL_ERROR "plumb_cuda_runner --check-only exited with ${status}:\n${out}${err}")
endif()
string(REGEX MATCHALL "skip  [^\n]*" skips "${out}")
set(missing_model 0)
foreach(line IN LISTS skips)
  if(line MATCHES ": model .* not found")
    math(EXPR missing_model "${missing_model} + 1")
  else()
    message(FATAL_ERROR "the harness skips a case of the committed suite: ${line}")
  endif()
endforeach()
string(REGEX MATCH "[0-9]+ cases read and checked[^\n]*" summary "${out}")
message("${summary}")
if(missing_model GREATER 0)
  message("(${missing_model} model cases skipped: their model file is not in ${MODELS})")
elseif(NOT summary MATCHES ", 0 skipped")
  message(FATAL_ERROR "expected 0 skipped: ${summary}")
endif()
