"""`python -m icebox_bench` is `icebox-bench`."""

import sys

from .cli import main

sys.exit(main())
