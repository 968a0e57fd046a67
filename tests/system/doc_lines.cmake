# doc_lines.cmake - the documented command lines run as written (included by
# tests/CMakeLists.txt; the runner is doc_lines.sh).
#
# docs.readme_lines and docs.user_guide_lines run every line of the ```sh run blocks of
# README.md and docs/user-guide.md from the repository root, with a python3 on PATH that is
# not the build's, and fail naming the file, the line and its output when one exits non-zero,
# when a file has no such line, or when the lines changed `git status --porcelain`. The lines
# name build/, so in another build folder (build-asan, ...) they exit 77, skipped. The lines
# start level-3 chips and MPI jobs (RESOURCE_LOCK chips) and DFX runs that may pick huge
# pages (RESOURCE_LOCK hugepages, as the tests that read the pool). docs.lines_* check that
# the runner itself fails where it must, on a small Markdown file written here.
set(PX_DOC_LINES_SH ${CMAKE_CURRENT_LIST_DIR}/doc_lines.sh)

# What this build lacks leaves lines out, each listed as skipped with the reason.
set(px_doc_skip "")
set(px_doc_why "")
if(NOT PX_MPI_FOUND)
  list(APPEND px_doc_skip "mpirun|--comm-transport mpi|PLEXUS_COMM_TRANSPORT=mpi")
  list(APPEND px_doc_why "no MPI plugin: Open MPI was not found (make deps installs it)")
endif()
if(NOT PX_PYTHON)
  list(APPEND px_doc_skip "plexus-python")
  list(APPEND px_doc_why "no Python package: PX_PYTHON=OFF")
endif()
string(REPLACE ";" "|" px_doc_skip "${px_doc_skip}")
string(REPLACE ";" ", and " px_doc_why "${px_doc_why}")

# px_doc_lines_test(NAME FILE LOCK...): runs the runnable lines of FILE (relative to the
# repository root) as ctest test docs.NAME, holding the resource locks LOCK...
function(px_doc_lines_test name file)
  add_test(NAME docs.${name}
           COMMAND sh ${PX_DOC_LINES_SH} ${CMAKE_SOURCE_DIR} ${file} ${CMAKE_BINARY_DIR})
  set_tests_properties(docs.${name} PROPERTIES TIMEOUT 600 SKIP_RETURN_CODE 77
                       RESOURCE_LOCK "${ARGN}"
                       ENVIRONMENT "DOC_LINES_SKIP=${px_doc_skip};DOC_LINES_SKIP_WHY=${px_doc_why}")
endfunction()
px_doc_lines_test(readme_lines README.md chips hugepages)
px_doc_lines_test(user_guide_lines docs/user-guide.md chips)

# The runner on a file of its own: a line that fails (the python3 stub: PATH's python3 is not
# the build's), a continued line joined as sh joins it, a plain ```sh block left alone; and a
# file with no ```sh run block, which must fail rather than pass having checked nothing.
set(px_doc_dir ${CMAKE_CURRENT_BINARY_DIR}/doc-lines)
file(WRITE ${px_doc_dir}/catches.md
     "text\n```sh run\ntrue  # a comment\n\n# a comment line\necho joined \\\n    line\n"
     "python3 -c 'print(1)'\n```\n```sh\nfalse\n```\n")
file(WRITE ${px_doc_dir}/none.md "text\n```sh\nfalse\n```\n```python\nprint(1)\n```\n")
# The runner's exit status is appended ("exit status N") so that the expression checks it too.
set(px_doc_run [=[sh "$0" "$@"; rc=$?; echo "exit status $rc"; [ $rc -ne 77 ] || exit 77]=])
add_test(NAME docs.lines_runner_catches
         COMMAND sh -c "${px_doc_run}" ${PX_DOC_LINES_SH} ${CMAKE_SOURCE_DIR}
                 ${px_doc_dir}/catches.md ${CMAKE_BINARY_DIR})
set_tests_properties(docs.lines_runner_catches PROPERTIES TIMEOUT 60 SKIP_RETURN_CODE 77
                     PASS_REGULAR_EXPRESSION
                     "catches.md:6: echo joined     line\n   joined line\n.*python3: not the build's python.*\nFAIL: [^\n]*catches.md:8: exit status 1: python3 -c 'print\\(1\\)'\n.*: 3 runnable lines, 3 run, 0 skipped, 1 failed\nFAIL: 1 of the runnable lines[^\n]*\nexit status 1\n$")
add_test(NAME docs.lines_runner_needs_lines
         COMMAND sh -c "${px_doc_run}" ${PX_DOC_LINES_SH} ${CMAKE_SOURCE_DIR}
                 ${px_doc_dir}/none.md ${CMAKE_BINARY_DIR})
set_tests_properties(docs.lines_runner_needs_lines PROPERTIES TIMEOUT 60 SKIP_RETURN_CODE 77
                     PASS_REGULAR_EXPRESSION
                     "(^|\n)FAIL: [^\n]*none.md has no runnable line[^\n]*\nexit status 1\n$")
