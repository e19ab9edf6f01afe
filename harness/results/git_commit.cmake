# Run by the build (cmake -P) before every build of cpullm_results: writes OUTPUT from INPUT
# with the source tree's commit, "-dirty" appended when tracked or untracked files differ from
# it. configure_file rewrites OUTPUT only when the text changes, so nothing recompiles otherwise.
execute_process(COMMAND git -C "${SOURCE_DIR}" rev-parse HEAD
  OUTPUT_VARIABLE GIT_COMMIT OUTPUT_STRIP_TRAILING_WHITESPACE RESULT_VARIABLE not_git ERROR_QUIET)
if(not_git)
  set(GIT_COMMIT "unknown")
else()
  execute_process(COMMAND git -C "${SOURCE_DIR}" status --porcelain
    OUTPUT_VARIABLE changes OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
  if(changes)
    string(APPEND GIT_COMMIT "-dirty")
  endif()
endif()
configure_file("${INPUT}" "${OUTPUT}" @ONLY)
