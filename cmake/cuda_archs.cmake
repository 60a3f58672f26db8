# Resolves TREEVERIFY_CUDA_ARCHS (CMakeLists.txt) into the list of SM architectures to build,
# as a normal variable that shadows the cache entry: "release" -> TV_RELEASE_ARCHS; "native"
# -> the compute capabilities nvidia-smi reports; "auto" -> native when that finds a GPU the
# kernels support, release otherwise. Says what it chose and why.
function(tv_resolve_cuda_archs)
  set(request "${TREEVERIFY_CUDA_ARCHS}")
  set(archs "")
  if(request STREQUAL "auto" OR request STREQUAL "native")
    find_program(TV_NVIDIA_SMI nvidia-smi)
    set(found "")
    if(TV_NVIDIA_SMI)
      execute_process(COMMAND ${TV_NVIDIA_SMI} --query-gpu=compute_cap --format=csv,noheader
                      OUTPUT_VARIABLE caps RESULT_VARIABLE rc ERROR_QUIET TIMEOUT 20)
      if(rc EQUAL 0)
        string(REPLACE "." "" caps "${caps}")
        string(REGEX MATCHALL "[0-9]+" found "${caps}")
        list(REMOVE_DUPLICATES found)
      endif()
    endif()
    set(unsupported "")
    foreach(a IN LISTS found)
      if(a STREQUAL "90")  # Hopper builds sm_90a code: the wgmma kernel needs it
        set(a "90a")
      endif()
      if(a IN_LIST TV_RELEASE_ARCHS)
        list(APPEND archs ${a})
      else()
        list(APPEND unsupported ${a})
      endif()
    endforeach()
    if(unsupported)
      message(STATUS "treeverify: visible GPU architecture(s) ${unsupported} are not among the "
                     "kernels' (${TV_RELEASE_ARCHS}); not built for them")
    endif()
    if(archs)
      message(STATUS "treeverify: building the CUDA kernels for the GPU(s) here only: sm_${archs} "
                     "(TREEVERIFY_CUDA_ARCHS=${request}; =release builds all six)")
    elseif(request STREQUAL "native")
      message(FATAL_ERROR "TREEVERIFY_CUDA_ARCHS=native but nvidia-smi found no GPU the kernels "
                          "support (found: '${found}'); use release or a list")
    else()
      set(archs ${TV_RELEASE_ARCHS})
      message(STATUS "treeverify: no supported GPU visible: building the release architectures")
    endif()
  elseif(request STREQUAL "release")
    set(archs ${TV_RELEASE_ARCHS})
  else()
    set(archs ${request})
  endif()
  # Code for sm_90 and for sm_90a would serve the same GPUs and the driver may load either,
  # while only sm_90a holds the wgmma kernel, which dispatch then counts on: keep 90a.
  if("90a" IN_LIST archs AND "90" IN_LIST archs)
    list(REMOVE_ITEM archs "90")
    message(STATUS "treeverify: both 90 and 90a asked: building 90a only (it holds the wgmma "
                   "kernel and runs on every sm_90 GPU)")
  endif()
  set(TREEVERIFY_CUDA_ARCHS "${archs}" PARENT_SCOPE)
endfunction()
