# Install rules (included from CMakeLists.txt when VKATTN_INSTALL is on). What goes where:
#   include/vkattn.h
#   lib/libvkattn.so.0.1.0, libvkattn.so.0 (SONAME), libvkattn.so; lib/libvkattn.a
#   lib/cmake/vkattn/vkattnConfig.cmake (+ Version, Targets): find_package(vkattn CONFIG) gives
#     vkattn::vkattn (the shared library; the static one with vkattn_USE_STATIC_LIBS=ON),
#     vkattn::vkattn_shared and vkattn::vkattn_static
#   lib/pkgconfig/vkattn.pc: pkg-config --cflags --libs vkattn (add --static for libvkattn.a)
#   bin/vkattn (the command line, when built)
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

install(FILES "${PROJECT_SOURCE_DIR}/include/vkattn.h" DESTINATION "${CMAKE_INSTALL_INCLUDEDIR}")
install(TARGETS vkattn vkattn_shared EXPORT vkattnTargets
  ARCHIVE DESTINATION "${CMAKE_INSTALL_LIBDIR}"
  LIBRARY DESTINATION "${CMAKE_INSTALL_LIBDIR}" NAMELINK_COMPONENT Development
  RUNTIME DESTINATION "${CMAKE_INSTALL_BINDIR}"
  INCLUDES DESTINATION "${CMAKE_INSTALL_INCLUDEDIR}")
if(TARGET vkattn_cli)
  install(TARGETS vkattn_cli RUNTIME DESTINATION "${CMAKE_INSTALL_BINDIR}")
endif()

set(vka_cmake_dir "${CMAKE_INSTALL_LIBDIR}/cmake/vkattn")
install(EXPORT vkattnTargets NAMESPACE vkattn:: DESTINATION "${vka_cmake_dir}")
configure_package_config_file("${PROJECT_SOURCE_DIR}/cmake/vkattnConfig.cmake.in"
  "${PROJECT_BINARY_DIR}/vkattnConfig.cmake" INSTALL_DESTINATION "${vka_cmake_dir}")
# 0.x: a new minor version may change the API, so only the same major.minor is compatible.
write_basic_package_version_file("${PROJECT_BINARY_DIR}/vkattnConfigVersion.cmake"
  COMPATIBILITY SameMinorVersion)
install(FILES "${PROJECT_BINARY_DIR}/vkattnConfig.cmake"
              "${PROJECT_BINARY_DIR}/vkattnConfigVersion.cmake"
        DESTINATION "${vka_cmake_dir}")

# vkattn.pc finds its prefix from its own place (${pcfiledir}), so an installed tree can move.
if(IS_ABSOLUTE "${CMAKE_INSTALL_LIBDIR}" OR IS_ABSOLUTE "${CMAKE_INSTALL_INCLUDEDIR}")
  set(VKA_PC_PREFIX "${CMAKE_INSTALL_PREFIX}")
  set(VKA_PC_LIBDIR "${CMAKE_INSTALL_FULL_LIBDIR}")
  set(VKA_PC_INCLUDEDIR "${CMAKE_INSTALL_FULL_INCLUDEDIR}")
else()
  set(VKA_PC_PREFIX "\${pcfiledir}")
  string(REPLACE "/" ";" vka_parts "${CMAKE_INSTALL_LIBDIR}/pkgconfig")
  foreach(part IN LISTS vka_parts)
    string(APPEND VKA_PC_PREFIX "/..")
  endforeach()
  set(VKA_PC_LIBDIR "\${prefix}/${CMAKE_INSTALL_LIBDIR}")
  set(VKA_PC_INCLUDEDIR "\${prefix}/${CMAKE_INSTALL_INCLUDEDIR}")
endif()
set(VKA_PC_LIBS_PRIVATE "-lpthread")
foreach(lib IN LISTS CMAKE_DL_LIBS)
  string(APPEND VKA_PC_LIBS_PRIVATE " -l${lib}")
endforeach()
string(APPEND VKA_PC_LIBS_PRIVATE " -lm")
if(VKA_HAVE_OPENMP)
  string(PREPEND VKA_PC_LIBS_PRIVATE "${OpenMP_C_FLAGS} ")
endif()
configure_file("${PROJECT_SOURCE_DIR}/cmake/vkattn.pc.in" "${PROJECT_BINARY_DIR}/vkattn.pc" @ONLY)
install(FILES "${PROJECT_BINARY_DIR}/vkattn.pc" DESTINATION "${CMAKE_INSTALL_LIBDIR}/pkgconfig")
