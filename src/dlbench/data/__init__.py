"""Framework-neutral input data: dataset layout checks, record formats, and DALI pipelines.

Import-light on purpose: `validate` and `formats` are pure Python (the orchestrator uses them);
only `pipelines` and `bench` import `nvidia.dali`, and only the worker imports those.
"""
