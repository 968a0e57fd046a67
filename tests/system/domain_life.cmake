# domain_life.cmake - test_domain_life forks chip processes (and kills and stops some): it
# takes the ctest RESOURCE_LOCK "chips" like every multi-process test (see l3.cmake).
set_tests_properties(unit.test_domain_life PROPERTIES RESOURCE_LOCK chips)
