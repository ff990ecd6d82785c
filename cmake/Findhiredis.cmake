# Finds hiredis (Debian: libhiredis-dev), which ships hiredis.pc but no CMake package, and defines the imported
# target hiredis::hiredis. Installed next to wandura-config.cmake, it lets the exported wandura::fleet (a static
# library that links hiredis) name the target rather than the path of the library on the machine that built it.
#
# The version is read from hiredis.h (HIREDIS_MAJOR/MINOR/PATCH), so that a version or a range can be asked for:
# hiredis before 1.0 changed its ABI with every minor version, and wandura::fleet is built against one of them.
#
# Result variables: hiredis_FOUND, hiredis_VERSION (and _MAJOR, _MINOR, _PATCH), WANDURA_HIREDIS_INCLUDE_DIR (the directory that holds
# hiredis/hiredis.h), WANDURA_HIREDIS_LIBRARY. src/fleet/CMakeLists.txt builds wandura::fleet with this module, so
# that the build and this module agree on one hiredis.
find_path(WANDURA_HIREDIS_INCLUDE_DIR NAMES hiredis/async.h)
find_library(WANDURA_HIREDIS_LIBRARY NAMES hiredis)

unset(hiredis_VERSION)
unset(hiredis_VERSION_MAJOR)
unset(hiredis_VERSION_MINOR)
unset(hiredis_VERSION_PATCH)
if(WANDURA_HIREDIS_INCLUDE_DIR AND EXISTS ${WANDURA_HIREDIS_INCLUDE_DIR}/hiredis/hiredis.h)
  file(STRINGS ${WANDURA_HIREDIS_INCLUDE_DIR}/hiredis/hiredis.h _hiredis_version_lines
       REGEX "^#define HIREDIS_(MAJOR|MINOR|PATCH) +[0-9]+$")
  foreach(_hiredis_part IN ITEMS MAJOR MINOR PATCH)
    string(REGEX REPLACE ".*#define HIREDIS_${_hiredis_part} +([0-9]+).*" "\\1" hiredis_VERSION_${_hiredis_part}
                         "${_hiredis_version_lines}")
  endforeach()
  set(hiredis_VERSION ${hiredis_VERSION_MAJOR}.${hiredis_VERSION_MINOR}.${hiredis_VERSION_PATCH})
  unset(_hiredis_version_lines)
  unset(_hiredis_part)
endif()

include(FindPackageHandleStandardArgs)
find_package_handle_standard_args(hiredis
  REQUIRED_VARS WANDURA_HIREDIS_LIBRARY WANDURA_HIREDIS_INCLUDE_DIR
  VERSION_VAR hiredis_VERSION
  HANDLE_VERSION_RANGE)

if(hiredis_FOUND AND NOT TARGET hiredis::hiredis)
  add_library(hiredis::hiredis UNKNOWN IMPORTED)
  set_target_properties(hiredis::hiredis PROPERTIES
    IMPORTED_LOCATION ${WANDURA_HIREDIS_LIBRARY}
    INTERFACE_INCLUDE_DIRECTORIES ${WANDURA_HIREDIS_INCLUDE_DIR})
endif()
mark_as_advanced(WANDURA_HIREDIS_INCLUDE_DIR WANDURA_HIREDIS_LIBRARY)
