# domain_shrink.cmake - test_domain_shrink forks chip processes and kills some: it takes the
# ctest RESOURCE_LOCK "chips" like every multi-process test (see l3.cmake).
set_tests_properties(unit.test_domain_shrink PROPERTIES RESOURCE_LOCK chips)
