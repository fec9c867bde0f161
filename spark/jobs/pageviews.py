"""spark-submit's main file for the page-view job: `spark-submit ... spark/jobs/pageviews.py --help`."""

import sys

from krafty_spark.job import main

if __name__ == "__main__":
    sys.exit(main())
