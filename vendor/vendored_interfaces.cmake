# Shared by the interface packages under vendor/: saycan_ros's CMakeLists.txt builds each one
# as an ExternalProject, only where find_package() finds no such package (pip builds against
# the ROS 2 wheels from PyPI). Usage, after project():
#   include(../vendored_interfaces.cmake)
#   saycan_vendored_begin()       # before find_package(ament_cmake ...)
#   find_package(...) + rosidl_generate_interfaces(...)
#   saycan_vendored_end()         # instead of ament_package()

macro(saycan_vendored_begin)
  if(SAYCAN_ROS_WHEEL_PREFIX)
    # ROS 2 from the PyPI wheels (see ../CMakeLists.txt): rosidl finds the
    # type supports through the AMENT_PREFIX_PATH environment variable.
    list(PREPEND CMAKE_PREFIX_PATH "${SAYCAN_ROS_WHEEL_PREFIX}")
    if(DEFINED ENV{AMENT_PREFIX_PATH} AND NOT "$ENV{AMENT_PREFIX_PATH}" STREQUAL "")
      set(ENV{AMENT_PREFIX_PATH} "${SAYCAN_ROS_WHEEL_PREFIX}:$ENV{AMENT_PREFIX_PATH}")
    else()
      set(ENV{AMENT_PREFIX_PATH} "${SAYCAN_ROS_WHEEL_PREFIX}")
    endif()
  endif()
endmacro()

macro(saycan_vendored_end)
  # Marks this copy as saycan_ros's: the parent build must not take it for a
  # real package when it finds it installed in the venv on the next build.
  file(WRITE "${CMAKE_CURRENT_BINARY_DIR}/vendored_by_saycan_ros"
    "${PROJECT_NAME}, vendored by saycan_ros\n")
  install(FILES "${CMAKE_CURRENT_BINARY_DIR}/vendored_by_saycan_ros"
    DESTINATION share/${PROJECT_NAME})

  # Keep this machine's Python/NumPy include dirs out of the exported targets
  # (as ../CMakeLists.txt does for saycan_ros): they may be a temporary build env.
  set(_py_lib ${PROJECT_NAME}__rosidl_generator_py)
  if(TARGET ${_py_lib})
    get_target_property(_incs ${_py_lib} INTERFACE_INCLUDE_DIRECTORIES)
    if(_incs)
      set(_wrapped "")
      foreach(_inc IN LISTS _incs)
        if(_inc MATCHES "^\\$<")
          list(APPEND _wrapped "${_inc}")
        else()
          list(APPEND _wrapped "$<BUILD_INTERFACE:${_inc}>")
        endif()
      endforeach()
      set_target_properties(${_py_lib} PROPERTIES INTERFACE_INCLUDE_DIRECTORIES "${_wrapped}")
    endif()
  endif()

  ament_package()

  # The PyPI wheels' imported targets carry include dirs of the machine they were
  # built on (/opt/python/...), which CMake rejects at generate time.
  get_property(_imported DIRECTORY PROPERTY IMPORTED_TARGETS)
  foreach(_tgt IN LISTS _imported)
    get_target_property(_incs ${_tgt} INTERFACE_INCLUDE_DIRECTORIES)
    if(_incs)
      set(_kept "")
      set(_changed FALSE)
      foreach(_inc IN LISTS _incs)
        if(_inc MATCHES "^/opt/python/" AND NOT EXISTS "${_inc}")
          set(_changed TRUE)
        else()
          list(APPEND _kept "${_inc}")
        endif()
      endforeach()
      if(_changed)
        set_target_properties(${_tgt} PROPERTIES INTERFACE_INCLUDE_DIRECTORIES "${_kept}")
      endif()
    endif()
  endforeach()
endmacro()
