# lint.comm_sizes: no file in src/comm over 900 lines and no function there over 60 (issue 35:
# comm's rooms stay rooms). scripts/check_sizes.py counts with Universal Ctags (make deps).
add_test(NAME lint.comm_sizes
         COMMAND /usr/bin/python3 ${PROJECT_SOURCE_DIR}/scripts/check_sizes.py
                 --root ${PROJECT_SOURCE_DIR}/src/comm --max-file 900 --max-function 60)
