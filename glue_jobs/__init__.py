"""DMQ's audits: PySpark jobs over the stream archive, the table exports and the usage records.

Each job has a folder with a thin `job.py` driver (arguments, session, input and output)
and pure `DataFrame -> DataFrame` transforms. The drivers run with `spark-submit`, as
AWS Glue 5 jobs (Spark 3.5) and in-process on local pyspark 4 (`make audit`).
"""
