import sys

from varlens.cli import main

sys.exit(main())
