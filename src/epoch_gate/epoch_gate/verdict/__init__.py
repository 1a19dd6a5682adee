"""Where the verdict is decided and said. `judge.judge` is the one judgement both front-ends call: the change's
facts and each suite's evidence in, verdicts and a report out. `suite.judge_suite` decides one suite;
`report`, `attestation` and `annotations` say the result. Nothing here runs a process or reads a file.
"""
