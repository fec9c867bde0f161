"""`python -m krafty_spark ...`: runs the page-view job (see krafty_spark.job)."""

import sys

from krafty_spark.job import main

sys.exit(main())
