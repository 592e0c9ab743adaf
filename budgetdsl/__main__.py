import sys

from budgetdsl.cli import main

sys.exit(main())
