# SPDX-License-Identifier: MIT
# Installation: the shared library, the public headers, a pkg-config file,
# a CMake package (zipline::zipline) and the man pages. Also registers the
# tests that check them: install_consumer (label install) and man_pages
# (label docs).
#
# Libs.private of zipline.pc: -lpthread plus ZL_PC_LIBS_PRIVATE (a list or a
# space-separated string). Append to it in the top-level scope (or with
# PARENT_SCOPE) before this file is included; -libverbs is also added
# automatically when the zipline target links ibverbs.

include(CMakePackageConfigHelpers)

if(NOT TARGET zipline::zipline)
  add_library(zipline::zipline ALIAS zipline)
endif()

# ---- library and header ---------------------------------------------------
install(TARGETS zipline EXPORT ziplineTargets
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
  RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
if(ZL_STATIC)
  install(TARGETS zipline_static ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR})
endif()
# (The include directory reaches zipline::zipline through the target's own
# $<INSTALL_INTERFACE:include>.)
install(FILES ${PROJECT_SOURCE_DIR}/include/zipline.h
  ${PROJECT_SOURCE_DIR}/include/zipline_kv.h
  DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})

# ---- pkg-config -------------------------------------------------------------
# Accept both a list and a space-separated string.
string(REPLACE ";" " " _zl_pc_libs "-lpthread ${ZL_PC_LIBS_PRIVATE}")
separate_arguments(_zl_pc_libs UNIX_COMMAND "${_zl_pc_libs}")
get_target_property(_zl_link zipline LINK_LIBRARIES)
if(_zl_link MATCHES "ibverbs|IBVERBS|Ibverbs")
  list(APPEND _zl_pc_libs -libverbs)
endif()
list(REMOVE_DUPLICATES _zl_pc_libs)
list(JOIN _zl_pc_libs " " ZL_PC_LIBS_PRIVATE_STR)
if(IS_ABSOLUTE "${CMAKE_INSTALL_LIBDIR}")
  set(ZL_PC_LIBDIR "${CMAKE_INSTALL_LIBDIR}")
else()
  set(ZL_PC_LIBDIR "\${exec_prefix}/${CMAKE_INSTALL_LIBDIR}")
endif()
if(IS_ABSOLUTE "${CMAKE_INSTALL_INCLUDEDIR}")
  set(ZL_PC_INCLUDEDIR "${CMAKE_INSTALL_INCLUDEDIR}")
else()
  set(ZL_PC_INCLUDEDIR "\${prefix}/${CMAKE_INSTALL_INCLUDEDIR}")
endif()
# The prefix relative to the .pc file itself, so that a moved tree works.
file(RELATIVE_PATH ZL_PC_TO_PREFIX ${CMAKE_INSTALL_FULL_LIBDIR}/pkgconfig ${CMAKE_INSTALL_PREFIX})
string(REGEX REPLACE "/$" "" ZL_PC_TO_PREFIX "${ZL_PC_TO_PREFIX}")
if(ZL_PC_TO_PREFIX STREQUAL "")
  set(ZL_PC_PREFIX "\${pcfiledir}")
else()
  set(ZL_PC_PREFIX "\${pcfiledir}/${ZL_PC_TO_PREFIX}")
endif()
configure_file(${CMAKE_CURRENT_LIST_DIR}/zipline.pc.in
  ${PROJECT_BINARY_DIR}/zipline.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/zipline.pc
  DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)

# ---- CMake package ----------------------------------------------------------
set(ZL_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/zipline)
install(EXPORT ziplineTargets NAMESPACE zipline::
  DESTINATION ${ZL_CMAKE_DIR})
configure_package_config_file(${CMAKE_CURRENT_LIST_DIR}/ziplineConfig.cmake.in
  ${PROJECT_BINARY_DIR}/ziplineConfig.cmake
  INSTALL_DESTINATION ${ZL_CMAKE_DIR})
# 0.x: minor versions may break the API.
write_basic_package_version_file(${PROJECT_BINARY_DIR}/ziplineConfigVersion.cmake
  VERSION ${PROJECT_VERSION} COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/ziplineConfig.cmake
  ${PROJECT_BINARY_DIR}/ziplineConfigVersion.cmake
  DESTINATION ${ZL_CMAKE_DIR})

# ---- man pages --------------------------------------------------------------
file(GLOB ZL_MAN3 CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/docs/man/*.3)
file(GLOB ZL_MAN7 CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/docs/man/*.7)
file(GLOB ZL_MAN1 CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/docs/man/*.1)
install(FILES ${ZL_MAN1} DESTINATION ${CMAKE_INSTALL_MANDIR}/man1)
install(FILES ${ZL_MAN3} DESTINATION ${CMAKE_INSTALL_MANDIR}/man3)
install(FILES ${ZL_MAN7} DESTINATION ${CMAKE_INSTALL_MANDIR}/man7)

# ---- tests ------------------------------------------------------------------
# Both are independent of how the library is compiled, so sanitizer builds
# leave them out (the consumer would also need the sanitizer runtime).
if(BUILD_TESTING AND NOT ZL_SANITIZE)
  # Every function in zipline.h and zipline_kv.h has a man page that groff
  # accepts.
  add_test(NAME man_pages
    COMMAND sh ${PROJECT_SOURCE_DIR}/docs/check-man.sh
            ${PROJECT_SOURCE_DIR}/include/zipline.h ${PROJECT_SOURCE_DIR}/include/zipline_kv.h
            ${PROJECT_SOURCE_DIR}/docs/man)
  set_tests_properties(man_pages PROPERTIES LABELS docs SKIP_RETURN_CODE 77)

  # Install into a scratch DESTDIR and build a consumer with pkg-config and
  # with find_package.
  add_test(NAME install_consumer
    COMMAND sh ${PROJECT_SOURCE_DIR}/tests/install/run.sh
            ${PROJECT_BINARY_DIR} ${PROJECT_SOURCE_DIR}/tests/install
            ${CMAKE_INSTALL_PREFIX} ${CMAKE_INSTALL_FULL_LIBDIR}
            ${CMAKE_COMMAND} ${CMAKE_C_COMPILER})
  set_tests_properties(install_consumer PROPERTIES
    LABELS install SKIP_RETURN_CODE 77 TIMEOUT 300)
endif()
