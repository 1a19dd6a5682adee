import sys

from epoch_gate.cli.main import main

sys.exit(main())
