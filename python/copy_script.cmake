# copy_script.cmake - copies the Python script IN to OUT with its first line made
# "#!PY" (the interpreter the package was built for) and OUT executable.
#   cmake -DIN=... -DOUT=... -DPY=... -P copy_script.cmake
file(READ ${IN} px_text)
string(REGEX REPLACE "^#![^\n]*" "#!${PY}" px_text "${px_text}")
file(WRITE ${OUT}.tmp "${px_text}")
execute_process(COMMAND chmod 755 ${OUT}.tmp RESULT_VARIABLE px_rc)
if(NOT px_rc EQUAL 0)
  message(FATAL_ERROR "copy_script: chmod 755 ${OUT}.tmp failed (${px_rc})")
endif()
file(RENAME ${OUT}.tmp ${OUT})
