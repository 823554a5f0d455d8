"""``spark-submit spark_jobs/write/__main__.py --table ... --op ...`` (or ``python -m
tidemark.jobs.write``): the write job on the master spark-submit gives."""

import sys

from tidemark.jobs.write.cli import main

if __name__ == "__main__":
    sys.exit(main())
