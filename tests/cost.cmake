# Included by ctest after the discovered GoogleTest lists (TEST_INCLUDE_FILES,
# tests/CMakeLists.txt): the tests that take longest under the emulator start
# first, so that on two cores the last minutes are not one long test running
# alone. ctest orders by COST (descending) until it has measured times of
# its own; the values are seconds measured under qemu (cortex-a76). A name
# that no longer exists is ignored.
foreach(entry
    "Prefill.BatchedMatchesTokenByTokenStories5M;80"
    "Threads.LogitsBitIdenticalForAnyThreadCountStories5M;70"
    "Spec.GreedyIdentityAcrossOptions;75"
    "CliPerplexityRef.Stories5MQ4KMScoresLikeLlamaCppAndTheLibrary;72"
    "PrefillExact.PerPositionStepsOnThePoolKeepTheBits;65"
    "Prefill.CalibrationFromBatchedPrefill;55"
    "Kernels.EveryGemvmMatchesItsGemvPerPosition;50"
    "ArchFixtures.EveryGearRunsAndSpecIsTheVerifier;49"
    "Spec.GreedyIsTheVerifierBitForBitStories5M;44"
    "Spec.SamplingKeepsTheVerifierDistribution;40"
    "Prefill.ArenaAccountsForScratchAndNothingAllocates;36"
    "Attention.EverySimdVariantMatchesGeneric;30"
    "Kv.LongGeneration10000StepsInAFixedPool;24"
    "Prefill.BatchedMatchesTokenByTokenStories260K;24"
    "GgufFixtures.Stories5MScoresLikeLlamaCpp;19")
  list(GET entry 0 name)
  list(GET entry 1 cost)
  set_tests_properties(${name} PROPERTIES COST ${cost})
endforeach()
