"""The code tasks: agents write Python functions scored by running the problem's tests in the sandbox.

`common` (the CodeTask base: prompts, scoring through the reward rule), `collab` (N=2: helper `aux` +
entry point), `coop` (N=2 on generated problems whose rule only the helper is told: `coop_problems`,
`coop_templates`), `single` (N=1), `extract` (code out of chat completions, never raising), `reward` (the
levelled reward), `measure` (a model's solve rate on a problem set, to calibrate the easy set).
"""
