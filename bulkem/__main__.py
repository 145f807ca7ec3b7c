import sys

from .interop.cli import main

sys.exit(main())
