import sys

from tpuctl.cli import main

sys.exit(main())
