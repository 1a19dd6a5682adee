"""Where the verdict is decided and said. `judge.judge` is the one judgement both front-ends call: the change's
facts and each suite's evidence in, verdicts and a report out. `suite.judge_suite` decides one suite;
`report`, `attestation` and `annotations` say the result. The judgement decides from the facts it is
given (it reads the base and the change only through the readers passed to it, and lstats changed
paths); `attestation` asks git for the statement's subject.
"""
