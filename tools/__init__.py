"""The maintainers' tooling, run from the repository root as `python -m tools.<name>` (CONTRIBUTING says
what each does): layout (where the notebooks are, read once), pins, catalog, execute (the one
executor: make outputs, make gpu-check), lessons and lesson_stats, make_exercises, nbgrader_metadata,
run_matrix. The site's own code is site/_ext/."""
