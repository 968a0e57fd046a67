# package.cmake - system tests of the installed packages (script: package.sh):
# setup.cmake_package (make install into a temporary PREFIX under the build folder, then
# find_package(plexus) + plexus::plexus and the installed Python package) and
# setup.python_venv (the venv route, offline). Both write the build's install manifest or
# its pip folder, so they hold RESOURCE_LOCK build_dir like setup.install.
if(PX_PYTHON)
  foreach(m cmake venv)
    if(m STREQUAL "cmake")
      set(n setup.cmake_package)
    else()
      set(n setup.python_venv)
    endif()
    add_test(NAME ${n}
             COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/system/package.sh ${m} ${CMAKE_SOURCE_DIR}
                     ${CMAKE_BINARY_DIR} ${CMAKE_CURRENT_BINARY_DIR}/package-${m}
                     ${PX_PYTHON_EXE})
    set_tests_properties(${n} PROPERTIES TIMEOUT 600 PASS_REGULAR_EXPRESSION "\nPASS\n"
                         FAIL_REGULAR_EXPRESSION "FAIL: " RESOURCE_LOCK build_dir
                         LABELS python)
  endforeach()
endif()
