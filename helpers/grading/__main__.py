"""``python -m helpers.grading ...``: the older name of ``python -m helpers.grading.batch ...`` (kept working).

Serves: instructors.
"""

import sys

from helpers.grading.batch.__main__ import main

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
