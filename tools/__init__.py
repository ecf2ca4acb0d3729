"""The maintainers' tooling as one package: `python -m tools.<name>` runs a tool from the repository root.

- `tools.course`: what every tool knows about the course's files (which notebooks exist, the solution
  markers, headings and asides, IPython syntax, the CPU environment and the nbval flags);
- `tools.catalog`: the per-notebook facts of catalog.toml and the tables generated from them;
- `tools.execute`: the one way a notebook is executed (a kernel of this interpreter);
- the tools: execute (`make outputs`), make_exercises, nbgrader_metadata, lesson_stats, gpu_check,
  run_matrix, build_site.
"""
