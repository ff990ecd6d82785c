# Finds Joyent's http_parser (Debian: libhttp-parser-dev), which has no CMake package of its own, and defines the
# imported target http_parser::http_parser. Used by the build of the emulator and, installed next to
# wandura-config.cmake, by the package config, so that the exported wandura::emulator names the target rather than
# the path of the library on the machine that built it.
#
# Result variables: http_parser_FOUND, WANDURA_HTTP_PARSER_INCLUDE_DIR, WANDURA_HTTP_PARSER_LIBRARY.
find_path(WANDURA_HTTP_PARSER_INCLUDE_DIR NAMES http_parser.h)
find_library(WANDURA_HTTP_PARSER_LIBRARY NAMES http_parser)

include(FindPackageHandleStandardArgs)
find_package_handle_standard_args(http_parser
  REQUIRED_VARS WANDURA_HTTP_PARSER_LIBRARY WANDURA_HTTP_PARSER_INCLUDE_DIR)

if(http_parser_FOUND AND NOT TARGET http_parser::http_parser)
  add_library(http_parser::http_parser UNKNOWN IMPORTED)
  set_target_properties(http_parser::http_parser PROPERTIES
    IMPORTED_LOCATION ${WANDURA_HTTP_PARSER_LIBRARY}
    INTERFACE_INCLUDE_DIRECTORIES ${WANDURA_HTTP_PARSER_INCLUDE_DIR})
endif()
mark_as_advanced(WANDURA_HTTP_PARSER_INCLUDE_DIR WANDURA_HTTP_PARSER_LIBRARY)
