# Writes git_commit.h with the commit of the source tree, at build time (every build), and
# touches it only when the commit changed, so figures name the commit they were built from.
execute_process(COMMAND git rev-parse --short=12 HEAD WORKING_DIRECTORY ${SRC}
                OUTPUT_VARIABLE commit OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET
                RESULT_VARIABLE rc)
if(NOT rc EQUAL 0 OR NOT commit)
  set(commit "unknown")
endif()
execute_process(COMMAND git status --porcelain --untracked-files=no WORKING_DIRECTORY ${SRC}
                OUTPUT_VARIABLE dirty OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
if(dirty)
  set(commit "${commit}-dirty")
endif()
set(content "// Generated at build time by git_commit.cmake.\n#pragma once\n#define TREEVERIFY_GIT_COMMIT \"${commit}\"\n")
if(EXISTS ${OUT})
  file(READ ${OUT} old)
endif()
if(NOT old STREQUAL content)
  file(WRITE ${OUT} "${content}")
endif()
