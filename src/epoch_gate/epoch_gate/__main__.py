import sys

from epoch_gate.cli import main

sys.exit(main())
