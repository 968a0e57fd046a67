# install-summary.cmake - the last step of `cmake --install` (CMakeLists.txt sets PX_LIBDIR,
# PX_BINDIR and PX_INCLUDEDIR just before). Says where plexus went and how a program built
# with `cc prog.c $(pkg-config --cflags --libs plexus)` finds libplexus.so.0 at run time:
# - a folder the dynamic loader searches (ldconfig lists it): ldconfig must refresh its cache
#   before the new library is found. We run it when we may (root, no DESTDIR); otherwise the
#   summary says to.
# - any other folder: LD_LIBRARY_PATH, an rpath, or static linking; the summary says so.
set(px_lib "${CMAKE_INSTALL_PREFIX}/${PX_LIBDIR}")
set(px_pc "${px_lib}/pkgconfig")
set(px_dest "$ENV{DESTDIR}")

set(px_searched FALSE)
find_program(PX_LDCONFIG ldconfig PATHS /sbin /usr/sbin)
if(PX_LDCONFIG)
  # -N -X: only print the folders and their libraries, change nothing.
  execute_process(COMMAND ${PX_LDCONFIG} -N -X -v OUTPUT_VARIABLE px_dirs ERROR_QUIET)
  string(REGEX MATCHALL "(^|\n)/[^:\n]*:" px_heads "${px_dirs}")
  get_filename_component(px_lib_real "${px_lib}" REALPATH)
  foreach(h ${px_heads})
    string(REGEX REPLACE "^\n?(.*):$" "\\1" d "${h}")
    get_filename_component(d_real "${d}" REALPATH)
    if(d_real STREQUAL px_lib_real)
      set(px_searched TRUE)
    endif()
  endforeach()
endif()

set(px_run "")
if(px_searched)
  execute_process(COMMAND id -u OUTPUT_VARIABLE px_uid OUTPUT_STRIP_TRAILING_WHITESPACE)
  if(px_dest STREQUAL "" AND px_uid STREQUAL "0")
    execute_process(COMMAND ${PX_LDCONFIG} RESULT_VARIABLE px_rc)
    if(px_rc EQUAL 0)
      set(px_run "ran ldconfig: ${px_lib} is a system library folder, programs find libplexus.so.0 there")
    else()
      set(px_run "ldconfig failed (status ${px_rc}): run `ldconfig` as root before starting a program linked against libplexus.so.0")
    endif()
  elseif(NOT px_dest STREQUAL "")
    set(px_run "staged under DESTDIR=${px_dest}: ${px_lib} is a system library folder, so run `ldconfig` once the files are in place, or programs linked against libplexus.so.0 fail to start")
  else()
    set(px_run "${px_lib} is a system library folder: run `sudo ldconfig` once, or programs linked against libplexus.so.0 fail to start (cannot open shared object file)")
  endif()
else()
  set(px_run "${px_lib} is not searched by the dynamic loader: run programs linked against libplexus.so.0 with LD_LIBRARY_PATH=${px_lib}, link with -Wl,-rpath,${px_lib}, or link the static library: cc prog.c $(pkg-config --cflags plexus) ${px_lib}/libplexus.a -lpthread -lm -ldl")
endif()

message(STATUS "plexus installed under ${px_dest}${CMAKE_INSTALL_PREFIX}:
  library   ${px_lib}/libplexus.so, libplexus.a
  headers   ${CMAKE_INSTALL_PREFIX}/${PX_INCLUDEDIR}/plexus/
  tool      ${CMAKE_INSTALL_PREFIX}/${PX_BINDIR}/plexus
  pkgconfig ${px_pc}/plexus.pc (PKG_CONFIG_PATH=${px_pc} if that is not a default folder)
  build     cc prog.c $(pkg-config --cflags --libs plexus)
  run       ${px_run}")
