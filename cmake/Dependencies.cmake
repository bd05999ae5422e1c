# Finds every external dependency once; sets VLM_HAS_CUDA.
find_package(Threads REQUIRED)
find_package(MPI REQUIRED COMPONENTS C)
find_package(HDF5 REQUIRED COMPONENTS C)
find_package(OpenCV REQUIRED COMPONENTS core imgproc imgcodecs)
find_package(Boost REQUIRED COMPONENTS program_options)
find_package(GTest REQUIRED)

# BLAS: OpenBLAS, its pthreads build (Debian/Ubuntu: libopenblas-pthread-dev, the
# default build of libopenblas-dev), held to one thread per call: the CPU backend runs
# BLAS calls on its own thread pool, cut into blocks (core/cpu/blas.cpp), and stops
# OpenBLAS's own threads at start-up, so the two never fight (docs/cpu-performance.md).
# Not the sequential build: Debian's is not safe to call from several threads at once. Debian installs the builds side by side under
# <libdir>/openblas-{pthread,openmp,serial}; this one is linked by its full path and its
# folder goes into the binaries' RPATH (core/CMakeLists.txt), so they load it whichever
# build the system's libopenblas.so.0 alternative names. Elsewhere:
# -DVLM_BLAS_LIBRARY=<libopenblas> -DVLM_BLAS_INCLUDE_DIR=<folder of its cblas.h>.
set(_vlm_blas_lib /usr/lib/${CMAKE_LIBRARY_ARCHITECTURE}/openblas-pthread)
set(_vlm_blas_inc /usr/include/${CMAKE_LIBRARY_ARCHITECTURE}/openblas-pthread)
find_library(VLM_BLAS_LIBRARY NAMES openblas PATHS ${_vlm_blas_lib} NO_DEFAULT_PATH)
find_path(VLM_BLAS_INCLUDE_DIR cblas.h PATHS ${_vlm_blas_inc} NO_DEFAULT_PATH)
if(NOT VLM_BLAS_LIBRARY OR NOT VLM_BLAS_INCLUDE_DIR)
  message(FATAL_ERROR "VLM: OpenBLAS (pthreads build) not found in ${_vlm_blas_lib} "
    "(Debian/Ubuntu: apt-get install libopenblas-pthread-dev, as ./run setup does; elsewhere "
    "pass -DVLM_BLAS_LIBRARY=<libopenblas> -DVLM_BLAS_INCLUDE_DIR=<folder of its cblas.h>)")
endif()
message(STATUS "VLM: BLAS ${VLM_BLAS_LIBRARY} (one thread per call; threads from the CPU backend's pool)")

# CUDA: AUTO = build when nvcc is found.
set(VLM_HAS_CUDA OFF)
if(NOT VLM_CUDA STREQUAL "OFF")
  if(NOT DEFINED CMAKE_CUDA_COMPILER AND EXISTS /usr/local/cuda/bin/nvcc)
    set(CMAKE_CUDA_COMPILER /usr/local/cuda/bin/nvcc)
  endif()
  include(CheckLanguage)
  check_language(CUDA)
  if(CMAKE_CUDA_COMPILER)
    if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
      set(CMAKE_CUDA_ARCHITECTURES 80 90)
    endif()
    enable_language(CUDA)
    # CMake < 3.26 does not know nvcc's -std=c++20 (nvcc >= 12 accepts it).
    if(NOT DEFINED CMAKE_CUDA20_STANDARD_COMPILE_OPTION)
      set(CMAKE_CUDA20_STANDARD_COMPILE_OPTION "-std=c++20")
      set(CMAKE_CUDA20_EXTENSION_COMPILE_OPTION "-std=c++20")
    endif()
    set(CMAKE_CUDA_STANDARD 20)
    set(CMAKE_CUDA_STANDARD_REQUIRED ON)
    find_package(CUDAToolkit REQUIRED)
    find_path(CUDNN_INCLUDE_DIR cudnn.h HINTS ${CUDAToolkit_INCLUDE_DIRS} REQUIRED)
    find_library(CUDNN_LIBRARY cudnn HINTS ${CUDAToolkit_LIBRARY_DIR} REQUIRED)
    find_path(NCCL_INCLUDE_DIR nccl.h HINTS ${CUDAToolkit_INCLUDE_DIRS} /usr/local/include REQUIRED)
    find_library(NCCL_LIBRARY nccl HINTS ${CUDAToolkit_LIBRARY_DIR} ${CUDAToolkit_LIBRARY_DIR}/../lib /usr/local/cuda/lib REQUIRED)
    set(VLM_HAS_CUDA ON)
    message(STATUS "VLM: CUDA backend ON (archs ${CMAKE_CUDA_ARCHITECTURES}), cuDNN ${CUDNN_LIBRARY}, NCCL ${NCCL_LIBRARY}")
  elseif(VLM_CUDA STREQUAL "ON")
    message(FATAL_ERROR "VLM_CUDA=ON but no CUDA compiler was found (set CMAKE_CUDA_COMPILER)")
  else()
    message(STATUS "VLM: CUDA backend OFF (nvcc not found)")
  endif()
endif()
