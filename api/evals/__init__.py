"""Agent evals: scenario files run as durable runs through Keel's API, checked against
their expectations, compared with a baseline and reported (docs/evals.md).

`scenario` (the files), `runner` (running them), `expectations` (checking a run),
`results` (pass rates, the results file, baselines), `reports` (JUnit, Markdown),
`stack` (the Keel an eval starts). Nothing is re-exported here: `api.core.schemas.evals`
reads `results`, and importing the runner from this package would make a cycle.
"""
