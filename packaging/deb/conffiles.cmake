# CPACK_PRE_BUILD_SCRIPTS: runs once the files are staged, before the .deb is made. Every file
# the package installs under /etc (the AppArmor profile) is a conffile, so that dpkg keeps an
# administrator's changes to it; CPack does not mark them itself.
file(GLOB_RECURSE etc_files LIST_DIRECTORIES false RELATIVE "${CPACK_TEMPORARY_INSTALL_DIRECTORY}"
     "${CPACK_TEMPORARY_INSTALL_DIRECTORY}/etc/*")
if(etc_files)
  list(SORT etc_files)
  list(TRANSFORM etc_files PREPEND "/")
  list(JOIN etc_files "\n" lines)
  file(WRITE "${CPACK_TOPLEVEL_DIRECTORY}/conffiles" "${lines}\n")
  list(APPEND CPACK_DEBIAN_PACKAGE_CONTROL_EXTRA "${CPACK_TOPLEVEL_DIRECTORY}/conffiles")
endif()
