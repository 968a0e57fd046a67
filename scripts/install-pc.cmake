# install-pc.cmake - run by `cmake --install` (CMakeLists.txt sets PX_PC_IN, PX_PC_OUT,
# PX_LIBDIR, PX_INCLUDEDIR and PX_VERSION just before): writes plexus.pc for the prefix of
# this install, which `--prefix` may have changed since the configure.
set(PX_PREFIX "${CMAKE_INSTALL_PREFIX}")
configure_file("${PX_PC_IN}" "${PX_PC_OUT}" @ONLY)
