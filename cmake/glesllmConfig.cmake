# find_package(glesllm): the targets glesllm::glesllm (libglesllm.so) and
# glesllm::glesllm_static (libglesllm.a, with its EGL, GLES and PCRE2 links).
include(CMakeFindDependencyMacro)
find_dependency(Threads)
find_dependency(PkgConfig)
pkg_check_modules(EGL REQUIRED IMPORTED_TARGET egl)
pkg_check_modules(GLESV2 REQUIRED IMPORTED_TARGET glesv2)
pkg_check_modules(PCRE2 REQUIRED IMPORTED_TARGET libpcre2-8)
include(${CMAKE_CURRENT_LIST_DIR}/glesllmTargets.cmake)
