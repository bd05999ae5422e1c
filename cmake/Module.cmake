# vlm_add_module(<folder> DEPS <targets...> [EXTRA_SOURCES ...] [LIBS ...]):
# builds vlm_<folder> from <folder>/*.cpp (recursively excluding cuda/ subfolders).
# A folder that later issues fill and that has no sources yet becomes an INTERFACE
# target, so everything links the same way from the start.
function(vlm_add_module folder)
  cmake_parse_arguments(M "" "" "DEPS;LIBS" ${ARGN})
  file(GLOB_RECURSE src CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/*.cpp)
  list(FILTER src EXCLUDE REGEX "/cuda/|/nccl/")
  set(target vlm_${folder})
  if(src)
    add_library(${target} ${src})
    target_link_libraries(${target} PUBLIC ${M_DEPS} ${M_LIBS})
    vlm_set_warnings(${target})
  else()
    add_library(${target} INTERFACE)
    target_link_libraries(${target} INTERFACE ${M_DEPS} ${M_LIBS})
  endif()
endfunction()
