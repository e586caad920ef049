# embedflow_exif: the EXIF reader (plugins/image/core/exif.cpp over libexif) that the image family
# (EXIF orientation on decode) and the geo family (geo.photo_folder) both link. Either family may
# be built without the other, so whichever comes first defines the library.
# EMBEDFLOW_HAVE_LIBHEIF: libheif was found (HEIC files' EXIF); without it HEIC files are
# reported per file as unsupported by this build.
if(NOT TARGET embedflow_exif)
  find_package(PkgConfig REQUIRED)
  pkg_check_modules(LIBEXIF REQUIRED IMPORTED_TARGET GLOBAL libexif) # Debian: libexif-dev
  # EMBEDFLOW_WITH_HEIF=OFF builds as if libheif were absent (to test that build).
  option(EMBEDFLOW_WITH_HEIF "Read the EXIF of HEIC files through libheif when it is found" ON)
  if(EMBEDFLOW_WITH_HEIF)
    pkg_check_modules(LIBHEIF IMPORTED_TARGET GLOBAL libheif) # Debian: libheif-dev (optional)
  endif()
  add_library(embedflow_exif STATIC ${PROJECT_SOURCE_DIR}/plugins/image/core/exif.cpp)
  target_include_directories(embedflow_exif PUBLIC ${PROJECT_SOURCE_DIR}/plugins/image)
  target_link_libraries(embedflow_exif PUBLIC PkgConfig::LIBEXIF)
  set_target_properties(embedflow_exif PROPERTIES POSITION_INDEPENDENT_CODE ON)
  if(LIBHEIF_FOUND)
    set(EMBEDFLOW_HAVE_LIBHEIF ON CACHE INTERNAL "libheif found")
  else()
    set(EMBEDFLOW_HAVE_LIBHEIF OFF CACHE INTERNAL "libheif found")
    message(STATUS "libheif not found: geo.photo_folder reports HEIC files as unsupported by this build")
  endif()
endif()
