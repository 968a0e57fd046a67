# abi.cmake - test_abi forks chip processes (a level-3 worker for px_domain_spec's checks): it
# takes the ctest RESOURCE_LOCK "chips" like every multi-process test (see l3.cmake).
set_tests_properties(unit.test_abi PROPERTIES RESOURCE_LOCK chips)
