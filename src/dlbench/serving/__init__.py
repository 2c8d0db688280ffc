"""mode=serve: latency and queries per second the way MLPerf Inference measures them, with its LoadGen.

settings.py and summary.py are framework-free and LoadGen-free (the orchestrator validates and records with
them); loadgen_run.py runs inside the worker, where LoadGen issues queries to the bench's inference step.
"""
