# Writes a C++ source that defines `std::string_view NAME()` returning the bytes of INPUT, for
# assets compiled into the binary (the chat page). Run at build time:
#   cmake -DINPUT=file -DOUTPUT=file.cpp -DNAME=folio::server::chat_page_html -P embed_text.cmake
# One raw string literal holds the text; GCC and Clang take literals of any length.
foreach(var INPUT OUTPUT NAME)
  if(NOT DEFINED ${var})
    message(FATAL_ERROR "embed_text.cmake: -D${var}=... is required")
  endif()
endforeach()
file(READ "${INPUT}" text)
set(delimiter "folio_embed")
string(FIND "${text}" ")${delimiter}\"" clash)
if(NOT clash EQUAL -1)
  message(FATAL_ERROR "embed_text.cmake: ${INPUT} contains the raw string delimiter ')${delimiter}\"'")
endif()
string(REGEX MATCH "^(.*)::([^:]+)$" qualified "${NAME}")
if(qualified)
  set(namespace "${CMAKE_MATCH_1}")
  set(function "${CMAKE_MATCH_2}")
else()
  message(FATAL_ERROR "embed_text.cmake: NAME must be namespace-qualified, got '${NAME}'")
endif()
get_filename_component(input_name "${INPUT}" NAME)
set(source "// Generated from ${input_name} by cmake/embed_text.cmake; edit that file, not this one.
#include <string_view>

namespace ${namespace} {

std::string_view ${function}() {
  static constexpr std::string_view kText = R\"${delimiter}(${text})${delimiter}\";
  return kText;
}

}  // namespace ${namespace}
")
file(WRITE "${OUTPUT}" "${source}")
