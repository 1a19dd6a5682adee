"""The change under review, read as data: the changed set and its trusted base (`changed`, `git`), trusted
mode's candidate from git objects (`candidate`, `tree`, `gather`), what it must not touch (`protection`,
`codeowners`, `oracle`), and what the replay may import of it (`closure`, `modules`, `product_calls`,
`buildfiles`). Nothing here imports or runs the change's code.
"""
