# SPDX-License-Identifier: MIT
# A Debian package of the installed tree (CPack's DEB generator):
# `make package` or `cpack -G DEB` in the build directory. It holds what
# `cmake --install` installs, under /usr; the tree is relocatable, so the
# prefix the build was configured with does not matter.
set(CPACK_GENERATOR "DEB")
set(CPACK_PACKAGE_NAME "zipline")
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_VENDOR "The zipline authors")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY
  "Microsecond messaging between processes and machines (shm, rdma, tcp, unix)")
set(CPACK_PACKAGE_CONTACT "The zipline authors <zipline@localhost>")
set(CPACK_RESOURCE_FILE_LICENSE ${PROJECT_SOURCE_DIR}/LICENSE)
set(CPACK_PACKAGING_INSTALL_PREFIX "/usr")
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION "libs")
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON) # dpkg-shlibdeps: libc, libibverbs
set(CPACK_DEBIAN_PACKAGE_HOMEPAGE "https://example.invalid/zipline")
include(CPack)

if(BUILD_TESTING AND NOT ZL_SANITIZE)
  # Build the package, unpack it into an empty directory, and build and run
  # a program against what it holds (no root, nothing installed on the host).
  add_test(NAME package_deb
    COMMAND sh ${PROJECT_SOURCE_DIR}/tests/install/deb.sh
            ${PROJECT_BINARY_DIR} ${PROJECT_SOURCE_DIR}/tests/install ${CMAKE_C_COMPILER})
  set_tests_properties(package_deb PROPERTIES
    LABELS install SKIP_RETURN_CODE 77 TIMEOUT 300 RUN_SERIAL TRUE)
endif()
