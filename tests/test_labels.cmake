# ctest labels for the tests gtest_discover_tests found. ctest reads this file after the discovered tests'
# own files (tests/CMakeLists.txt appends it to TEST_INCLUDE_FILES), whose lists dew_text_tests_TESTS and
# dew_tests_TESTS name every test. docs/testing.md says what each label is for and how they were chosen.
#
#   cli          runs the built `dew` as a child process
#   serve        starts `dew serve` and talks HTTP to it
#   distributed  several processes of one job: `dew launch`, its supervisor, multi-rank training
#   reference    checks against a reference implementation: Python (DEW_REFERENCE_PYTHON) or llama.cpp
#                (DEW_LLAMA_GREEDY); it skips without
#   slow         takes 20 s or more alone on the 2-core build VM (docs/testing.md: how it was measured)
#   unit         every test that is none of cli, serve, distributed and slow: in this process and quick
#                (`ctest -L unit` is the quick check); a reference test can be unit too
#
# Each list holds CMake regular expressions matched against "Suite.Test"; a parameterized test's instance
# prefix ("Family/") and parameter suffix ("/0", "/\"llama\"") are dropped before matching. A test may get
# several labels.

set(DEW_LABEL_PATTERNS_cli
    "^(TrainCommand|TokenizeCommand|TokenizerCommand|ModelCommands|SamplingDefaultsCommands|GrpoTrainCommand|VersionCommand|ImageRuns)\\."
    "^PostTrainingRuns\\.(SftOnChatJsonlLearnsTheAnswersAndServesLikeAnyRun|SftWithLoraCheckpointsOnlyAdaptersAndExportsThem)$"
    "^PostTrainingRuns\\.(DpoStartsAtLogTwoAndLearnsThePreference|BadJsonlLinesAreRefusedBeforeAnythingIsWritten)$"
    "^PostTrainingRuns\\.GrpoWithLoraTrainsAdaptersAgainstItsBase$"
    "^ReliabilityInputs\\.NanInEmaIsRefusedByEvalGenerateAndExport$"
    "^ReliabilityRuntime\\.(ExtremeSamplingFlagsWorkOrAreRefusedWithExitOne|CtrlCEndsGenerateAndChatAtOnce)$"
    "^ReliabilityRuntime\\.(CtrlCEndsEvalAtOnceAndStopsTrainingWithACheckpoint|SecondSignalForceQuitsTraining)$"
    "^ReliabilityWriters\\.(ExportForceReplacesOnlyAPreviousExport|StaleTemporariesOfADeadWriterAreRemovedByTheNext)$"
    "^MDLMRunKind\\.(CommandsTrainEvaluateAndGenerate|FromAnAutoregressiveModelWithLoraAccumulationAndBf16ThenExportAsLlada)$"
    "^SampleQuality\\.DewEvalReportsThemForAFashionRun$"
    "^(HubCacheChat|SmolLM2Chat)\\.")

set(DEW_LABEL_PATTERNS_serve
    "^(ServeHttp|ServeHttpLoad|ServeOpenAIClient)\\.")

set(DEW_LABEL_PATTERNS_distributed
    "^(DistributedTraining|LaunchCommand|LaunchChildren|ProcessGroupNccl)\\.")

set(DEW_LABEL_PATTERNS_reference
    "^TinyGgufExport\\.ReadByGgufPyAndTransformers$"
    "^GgufFamily\\.ExportIsReadByGgufPyUnderTheArchitecturesTensorNames$"
    "^HfExport\\.RoundTripsAndTransformersAgrees$"
    "^Lora\\.PeftLoadsDewsExport$"
    "^LlamaCppRunsExport\\."
    "^LlamaCppRunsFamilyExport\\."
    "^HfFamilyNamedLora\\.ExportIsPeftsDirectory$"
    "^HfFamilyPeftExport\\.ExportReadBackByPeft$")

set(DEW_LABEL_PATTERNS_slow
    "^DistributedTraining\\."
    "^SampleQuality\\.RealImagesScoreAsRealAndNoiseDoesNot$"
    "^GgufExport\\.SmolLM2ToF16AndQ8_0$"
    "^LlamaCppRunsExport\\.SmolLM2")

# `unit` goes to a test that is none of cli, serve, distributed and slow (a reference test can be unit).
set(DEW_LABELS cli serve distributed slow reference)

foreach(dew_test IN LISTS dew_text_tests_TESTS dew_tests_TESTS)
  # "Family/Suite.Test/param" -> "Suite.Test"
  string(REGEX REPLACE "^[^.]*/" "" dew_test_key "${dew_test}")
  string(REGEX REPLACE "/.*$" "" dew_test_key "${dew_test_key}")
  set(dew_test_labels "")
  foreach(dew_label IN LISTS DEW_LABELS)
    foreach(dew_pattern IN LISTS DEW_LABEL_PATTERNS_${dew_label})
      if(dew_test_key MATCHES "${dew_pattern}")
        list(APPEND dew_test_labels ${dew_label})
        break()
      endif()
    endforeach()
  endforeach()
  if(NOT dew_test_labels MATCHES "cli|serve|distributed|slow")
    list(APPEND dew_test_labels unit)
  endif()
  set_tests_properties("${dew_test}" PROPERTIES LABELS "${dew_test_labels}")
endforeach()
